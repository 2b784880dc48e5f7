"""The commands on the history: history, diff, revert, and history prune."""

import difflib
import os

from ..changes import normalized
from ..errors import VersionConflict
from ..markdown import parse_document, read_utf8_file
from ..versions import parse_version
from .messages import CommandError
from .output import actor_text, emit, print_json, stale, table

HISTORY_COLUMNS = [
    ("updated_at", "VERSION", lambda r: r["updated_at"] + (" *" if r["current"] else "")),
    ("action", "ACTION", lambda r: r["action"] + ("" if r["published"] else " (draft)")),
    ("actor", "ACTOR", lambda r: actor_text(r["actor"], r.get("actor_issuer")) + (
        " (approved by %s)" % r["approver"] if r.get("approver") else "")),
    ("event", "EVENT", lambda r: r["event"] or "-"),
    ("bytes", "BYTES", lambda r: "%d%s" % (r["bytes"], " pruned" if r["pruned"] else "")),
    ("bytes_change", "CHANGE", lambda r: "%+d" % r["bytes_change"]),
    ("summary", "SUMMARY", lambda r: r["summary"] or ""),
    ("title", "TITLE", lambda r: r["title"]),
    ("sequence", "SEQ", lambda r: r["sequence"] if r["sequence"] is not None else "-"),
    ("published", "PUBLISHED", lambda r: "yes" if r["published"] else "no"),
    ("pruned", "PRUNED", lambda r: "yes" if r["pruned"] else "no"),
    ("current", "CURRENT", lambda r: "yes" if r["current"] else "no"),
]


def cmd_history(store, args, out):
    """An article's versions (or, as ``history prune KB``, prune a knowledge base's)."""
    if args.prune is not None:
        return history_prune(store, args, out)
    rows = store.history(args.kb, args.article)
    if args.json:
        return print_json(rows, out)

    def default(rows, out):
        print(table([heading for _, heading, _ in HISTORY_COLUMNS[:7]],
                    [[cell(r) for _, _, cell in HISTORY_COLUMNS[:7]] for r in rows]), file=out)
    return emit(rows, HISTORY_COLUMNS, args, out, default)


def history_prune(store, args, out):
    """``kb history prune KB --keep-days N``: drop the texts of older versions (with --yes)."""
    kb_id = args.prune
    plan = store.prune_history(kb_id, args.keep_days, dry_run=not args.yes)
    if args.json:
        return print_json(plan, out)
    if not args.yes:
        print("would prune %d version(s) of %s older than %s (the current versions are kept); "
              "run again with --yes to prune them" % (plan["pruned"], kb_id, plan["before"]),
              file=out)
        return
    print("pruned %d version(s) of %s older than %s" % (plan["pruned"], kb_id, plan["before"]),
          file=out)


def cmd_diff(store, args, out):
    """A unified diff between two versions of an article (default: the one before --to, and
    the current one)."""
    for value, name in ((args.from_, "--from"), (args.to, "--to")):
        if value is not None:
            parse_version(value, name)
    rows = store.history(args.kb, args.article)
    versions = [r["updated_at"] for r in rows]
    if args.file is not None:
        return diff_file(store, args, out, args.to or versions[-1])
    to = args.to or versions[-1]
    if args.from_ is not None:
        start = args.from_
    else:
        before = [v for v in versions if v < to] if to in versions else versions[:-1]
        start = before[-1] if before else to
    texts = store.version_texts(args.kb, args.article, [start, to])
    (old_title, old), (new_title, new) = texts[start], texts[to]
    return print_diff(args, out, (old_title, old, "%s@%s" % (args.article, start), start),
                      (new_title, new, "%s@%s" % (args.article, to), to))


def diff_file(store, args, out, version):
    """``kb diff KB ART --file F``: the article at ``version`` against the file F, read as
    an import reads it (front matter and a # heading give the title)."""
    texts = store.version_texts(args.kb, args.article, [version])
    name = os.path.splitext(os.path.basename(args.file))[0]
    try:
        title, body, _ = parse_document(read_utf8_file(args.file, "--file %s" % args.file,
                                                       "--file"), name)
    except ValueError as exc:
        raise CommandError("--file %s cannot be read as import reads Markdown: %s"
                           % (args.file, exc)) from None
    old_title, old = texts[version]
    # Compared as an import compares them: line breaks unified, blank lines at the ends not.
    old, body = normalized(old) + "\n", normalized(body) + "\n"
    return print_diff(args, out, (old_title, old, "%s@%s" % (args.article, version), version),
                      (title, body, args.file, args.file))


def print_diff(args, out, old, new):
    """A unified diff of ``(title, content, label, name)`` pairs, coloured on a terminal."""
    (old_title, old, old_label, start), (new_title, new, new_label, to) = old, new
    lines = list(difflib.unified_diff(
        ["title: %s\n" % old_title, "\n"] + old.splitlines(True),
        ["title: %s\n" % new_title, "\n"] + new.splitlines(True), old_label, new_label))
    if args.json:
        return print_json({"knowledge_base_id": args.kb, "article_id": args.article,
                           "from": start, "to": to, "diff": "".join(lines)}, out)
    colour = out.isatty() and not os.environ.get("NO_COLOR")
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of text\n"
        if colour and line[:1] in "+-@" and not line.startswith(("+++", "---")):
            code = {"+": "32", "-": "31", "@": "36"}[line[0]]
            line = "\x1b[%sm%s\x1b[0m%s" % (code, line.rstrip("\n"), "\n")
        out.write(line)


def cmd_revert(store, args, out):
    """A new version with --to's title and content, if the article is still at
    --expected-version (exit 3 if not)."""
    try:
        result = store.revert(args.kb, args.article, args.to,
                              expected_version=args.expected_version, actor=args.actor,
                              summary=args.summary)
    except VersionConflict as exc:
        raise stale(exc, args, out) from None
    if args.json:
        return print_json(dict(result, knowledge_base_id=args.kb, article_id=args.article,
                               reverted_to=args.to), out)
    event = result["event"]
    if not result["changed"]:
        print("unchanged: %s already holds the title and text of %s; no version was made (it "
              "is still at %s)" % (args.article, args.to, result["updated_at"]), file=out)
        return None
    print("reverted %s to %s: version %s%s" % (
        args.article, args.to, result["updated_at"],
        ", event %d" % event["sequence"] if event else " (a draft: no event)"), file=out)
