"""The commands between a knowledge base and a folder of Markdown files: import."""

import sys

from .messages import Conflict
from .output import Progress, print_json

def cmd_import(store, args, out):
    """Sync a folder of Markdown files into a knowledge base; exit 3 if edits were kept."""
    result = store.import_directory(args.kb, args.directory, prune=args.prune, force=args.force,
                                    dry_run=args.dry_run, progress=Progress(sys.stderr))
    if args.json:
        print_json(result, out)
    else:
        for action in result["actions"]:
            if action["action"] == "unchanged" and not args.dry_run:
                continue
            print(describe_action(action, args), file=out)
        counts = result["counts"]
        print("%s%s" % ("plan (nothing written): " if args.dry_run else "",
                        ", ".join("%s %d" % (name, counts[name]) for name in counts
                                  if counts[name] or name in ("create", "update", "unchanged"))),
              file=out)
    conflicts = result["counts"]["conflict"]
    if conflicts:
        raise Conflict("%d article(s) were edited since the import wrote them and were left "
                       "alone; run import with --force to overwrite them with their files"
                       % conflicts)


def describe_action(action, args):
    """One line of an import's plan or report."""
    kind, source = action["action"], action["source"]
    article = action.get("article_id", "(new)")
    if kind == "conflict":
        return ("conflict  %s -> %s: edited since import (import wrote %s, now %s); kept"
                % (source, article, action["import_version"] or "nothing: an older import",
                   action["current_version"]))
    if kind == "rename":
        return "rename    %s -> %s (was %s)" % (source, article, action["previous_source"])
    if kind == "orphan":
        return "orphan    %s -> %s: file gone, article kept (--prune unpublishes)" % (
            source, article)
    return "%-9s %s -> %s" % (kind, source, article)
