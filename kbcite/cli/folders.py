"""The commands between a knowledge base and a folder of Markdown files: import and export."""

import os
import sys

from ..errors import InvalidArgument
from .messages import Conflict, Interrupted, UsageError
from .output import Progress, emit, print_json

IMPORT_COLUMNS = [
    ("action", "ACTION", lambda a: a["action"]),
    ("source", "FILE", lambda a: a["source"]),
    ("article_id", "ARTICLE", lambda a: a.get("article_id") or "(new)"),
    ("version", "VERSION", lambda a: a.get("version") or a.get("current_version") or "-"),
    ("title", "TITLE", lambda a: a["title"]),
]
EXPORT_COLUMNS = [
    ("action", "ACTION", lambda a: a["action"]),
    ("path", "FILE", lambda a: a["path"]),
    ("article_id", "ARTICLE", lambda a: a["article_id"]),
    ("version", "VERSION", lambda a: a["version"]),
]


def cmd_import(store, args, out):
    """Sync a folder of Markdown files into a knowledge base; exit 3 if edits were kept."""
    progress = Progress(sys.stderr)
    try:
        result = store.folders.import_directory(args.kb, args.directory, prune=args.prune,
                                        force=args.force, dry_run=args.dry_run,
                                        skip_bad=args.skip_bad, yes=args.yes,
                                        progress=progress)
    except KeyboardInterrupt:
        progress.finish()
        raise Interrupted("interrupted: nothing was written (an import writes all of it or "
                          "none)") from None
    progress.finish()
    if args.json:
        print_json(result, out)
    elif getattr(args, "format", None) not in (None, "table") or getattr(args, "fields", None):
        emit(result["actions"], IMPORT_COLUMNS, args, out)
    else:
        for action in result["actions"]:
            if action["action"] == "unchanged" and not args.dry_run:
                continue
            print(describe_action(action), file=out)
        for item in result.get("skipped", []):
            print("skipped   %s (%s)" % (item["source"], item["reason"]), file=out)
        for item in result.get("bad", []):
            print("bad       %s: %s; not imported" % (item["source"], item["reason"]),
                  file=out)
        for warning in result.get("warnings", []):
            print("warning: %s; a real run needs --yes" % warning, file=out)
        for note in result.get("notes", []):
            print("note: %s" % note, file=out)
        print(summary(result), file=out)
    conflicts = result["counts"]["conflict"]
    if conflicts:
        raise Conflict("%d article(s) were edited since the import wrote them and were left "
                       "alone; kb export %s FOLDER --edited writes them to their files (where "
                       "only the store changed), kb merge %s ARTICLE --file F merges one whose "
                       "file changed too, or import with --force to overwrite them with their "
                       "files" % (conflicts, args.kb, args.kb))


def summary(result):
    """The last line of an import: how many files changed an article, and how (an article
    unpublished has no file, so it is counted apart from the files)."""
    counts = result["counts"]
    changed = sum(counts[name] for name in ("create", "update", "rename", "adopt"))
    files = sum(counts[name] for name in counts if name not in ("unpublish", "orphan"))
    return "%s%d of %d file(s) %s: %s" % (
        "plan (nothing written): " if result["dry_run"] else "", changed, files,
        "would change an article" if result["dry_run"] else "changed an article",
        ", ".join("%s %d" % (name, counts[name]) for name in counts
                  if counts[name] or name in ("create", "update", "unchanged")))


def describe_action(action):
    """One line of an import's plan or report."""
    kind, source = action["action"], action["source"]
    article = action.get("article_id", "(new)")
    if kind == "conflict":
        return ("conflict  %s -> %s: edited since import (import wrote %s, now %s); kept"
                % (source, article, action["import_version"] or "nothing: an older import",
                   action["current_version"]))
    if kind == "rename":
        similar = action.get("similarity")
        return "rename    %s -> %s (was %s%s)" % (
            source, article, action["previous_source"],
            ", %d%% similar" % similar if similar is not None and similar < 100 else "")
    if kind == "adopt":
        return "adopt     %s -> %s (an article made in the store)" % (source, article)
    if kind == "orphan":
        return "orphan    %s -> %s: file gone, article kept (--prune unpublishes)" % (
            source, article)
    return "%-9s %s -> %s" % (kind, source, article)


def cmd_export(store, args, out):
    """Write the articles to a folder as Markdown files; exit 3 if a file changed on both
    sides was left alone."""
    progress = Progress(sys.stderr)
    try:
        result = store.folders.export_directory(args.kb, args.directory, include_drafts=args.all,
                                        edited=args.edited, force=args.force, yes=args.yes,
                                        dry_run=args.dry_run, progress=progress,
                                        front_matter=True if args.front_matter else None,
                                        to_new_folder=args.to_new_folder)
    except InvalidArgument as exc:
        if "import_root" in exc.details:  # --edited into another folder than the imported
            raise UsageError(exc.message.replace("to_new_folder", "--to-new-folder")) from None
        raise
    except KeyboardInterrupt:
        progress.finish()
        done = progress.done.get("export", (0, 0))
        raise Interrupted("interrupted after writing %d of %d file(s); each is whole, and a "
                          "new export writes the rest" % done) from None
    progress.finish()
    if args.json:
        print_json(result, out)
    elif getattr(args, "format", None) not in (None, "table") or getattr(args, "fields", None):
        emit(result["actions"], EXPORT_COLUMNS, args, out)
    else:
        for action in result["actions"]:
            if action["action"] == "unchanged":
                continue
            note = {"conflict": ": the file changed since its import too; kept (kb merge %s "
                                "%s --file %s merges the two; --force overwrites it)"
                                % (args.kb, action["article_id"],
                                   os.path.join(args.directory, action["path"])),
                    "exists": ": another text is there; kept (--yes overwrites it)"}.get(
                                    action["action"], "")
            print("%-9s %s <- %s%s" % (action["action"], action["path"], action["article_id"],
                                       note), file=out)
        counts = result["counts"]
        print("%s%s" % ("plan (nothing written): " if args.dry_run else "",
                        ", ".join("%s %d" % (name, counts[name]) for name in counts
                                  if counts[name] or name in ("write", "unchanged"))), file=out)
    if result["counts"]["conflict"]:
        raise Conflict("%d file(s) changed since their import, as their articles did, and were "
                       "left alone; merge each with kb merge %s ARTICLE --file F (kb diff %s "
                       "ARTICLE --file F shows the difference), or export with --force to "
                       "overwrite the files" % (result["counts"]["conflict"], args.kb, args.kb))
