"""The admin command line of a knowledge-base store: ``kb`` (or ``python -m kbcite``).

A thin layer over ``kbcite.store``: the reading commands run the same tools an agent calls
(``search``, ``read``, ``events``), ``edit`` is the agent's compare-and-swap edit, and the
rest are the people's side (``init``, ``add``, ``save``, ``publish``, ``unpublish``, ``list``,
``import``). ``--json`` prints what the tools return; without it, tables for a person.

    kb init --db kb.sqlite3 support
    kb import --db kb.sqlite3 support ./docs
    kb search --db kb.sqlite3 support "refund window"

Exit status: 0 done, 1 error, 2 usage, 3 conflict (a stale --expected-version, or an import
that left edited articles alone). A closed output pipe ends the command quietly (141).
"""

import argparse
import difflib
import getpass
import json
import os
import sys
import time
import uuid

from . import __version__
from .errors import InvalidArgument, NotFound, ToolError, VersionConflict
from .limits import SCHEMA_VERSION, SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX
from .markdown import read_utf8_file
from .store import KBStore
from .tokens import WRITE_MODES
from .versions import parse_version

PROG = "kb"

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_CONFLICT = 0, 1, 2, 3
# What a shell reports for a process ended by SIGPIPE; we end that way, minus the traceback.
EXIT_BROKEN_PIPE = 141

# The store names an argument as the tools do; a person typed the command line's spelling.
CLI_NAMES = {
    "after_sequence": "--after",
    "expected_version": "--expected-version",
    "idempotency_key": "--idempotency-key",
    "limit": "--limit",
    "query": "QUERY",
    "kb_id": "KB",
    "knowledge_base_id": "KB",
    "article_id": "ARTICLE",
    "resource_id": "KB",
    "to_version": "--to",
    "keep_days": "--keep-days",
    "actor": "--actor",
    "summary": "--summary",
}

# Long imports report progress on stderr at most this often.
PROGRESS_EVERY_S = 1.0


class Conflict(Exception):
    """A command that found a newer version than the one it was told; exit status 3."""


class CommandError(ToolError):
    """A failure the command line words itself, already for a person; exit status 1."""

    code = "command_failed"


# -- helpers -----------------------------------------------------------------------------------


def person_message(error):
    """A store error in words for a person at a terminal: command-line names, no agent advice."""
    details = error.details
    if isinstance(error, CommandError):
        return error.message
    if error.code == "version_conflict":
        kb, article = details["knowledge_base_id"], details["article_id"]
        return ("article %s in knowledge base %s has changed since version %s: it is now at %s. "
                "Read it again (kb read %s %s; kb diff shows what changed), re-apply your "
                "change, and run the command again with --expected-version %s." % (article, kb, details["expected_version"],
                                            details["current_version"], kb, article,
                                            details["current_version"]))
    if error.code == "not_found" and "article_id" in details:
        return ("no published article %s in knowledge base %s (kb list %s shows every article, "
                "drafts included)" % (details["article_id"], details["knowledge_base_id"],
                                      details["knowledge_base_id"]))
    if error.code == "not_found":
        return ("there is no knowledge base %s in this store (kb knowledge-bases lists them)"
                % details["knowledge_base_id"])
    message = error.message
    for tool_name, cli_name in CLI_NAMES.items():
        message = _replace_word(message, tool_name, cli_name)
    return message


def _replace_word(text, word, replacement):
    """``text`` with ``word`` replaced where it stands as a whole word."""
    out, at = [], 0
    while True:
        found = text.find(word, at)
        if found < 0:
            return "".join(out) + text[at:]
        end = found + len(word)
        whole = (found == 0 or not (text[found - 1].isalnum() or text[found - 1] == "_")) and (
            end == len(text) or not (text[end].isalnum() or text[end] == "_"))
        out += [text[at:found], replacement if whole else word]
        at = end


def login_name():
    """The person's login name ($USER and its kin, else the account's), or None."""
    try:
        return getpass.getuser() or None
    except (KeyError, OSError, ImportError):  # no such variable, and no passwd entry
        return None


def read_content(args, required):
    """The content of ``--file`` (``-``: standard input), ``--content``, or, where the command
    needs content and neither is given, piped standard input; else ``None``."""
    if args.file == "-":
        return sys.stdin.read()
    if args.file is not None:
        text = read_utf8_file(args.file, "--file %s" % args.file, "--file")
        return text[1:] if text.startswith("\ufeff") else text
    if args.content is not None:
        return args.content
    if not required:
        return None
    if not sys.stdin.isatty():  # piped in: ``cat new.md | kb edit ...``
        return sys.stdin.read()
    raise InvalidArgument("give the content with --file F, --content TEXT, or on "
                                   "standard input", argument="--content")


def table(header, rows):
    """Rows as left-aligned text columns under ``header``; the last column is not padded."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header) - 1)]
    lines = []
    for row in [header] + rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def one_line(text, width):
    """``text`` on one line, cut to ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def print_json(value, out):
    """JSON as the tools return it, indented for a person who reads it too."""
    json.dump(value, out, ensure_ascii=False, indent=2)
    out.write("\n")


class Progress:
    """Progress of a long import on stderr: at most one line a second, and the last."""

    def __init__(self, stream):
        self.stream = stream
        self.last = 0.0

    def __call__(self, phase, done, total):
        now = time.monotonic()
        if done == total or now - self.last >= PROGRESS_EVERY_S:
            if total >= 100:
                print("%s: %s %d of %d files" % (PROG, {"read": "read", "write": "wrote"}[phase],
                                                 done, total), file=self.stream)
            self.last = now


# -- the commands ------------------------------------------------------------------------------


def cmd_init(store, args, out):
    """Create the knowledge base KB (and the store, if the file is new)."""
    store.create_knowledge_base(args.kb, args.name)
    print("created knowledge base %s in %s" % (args.kb, args.db), file=out)


def cmd_knowledge_bases(store, args, out):
    """List the knowledge bases of the store."""
    rows = store.list_knowledge_bases()
    if args.json:
        return print_json(rows, out)
    print(table(["KB", "PUBLISHED", "ARTICLES", "EVENTS", "NAME"],
                [[r["kb_id"], r["published"], r["articles"], r["head_sequence"], r["name"] or ""]
                 for r in rows]), file=out)


def cmd_add(store, args, out):
    """Add an article; prints its ID."""
    article_id = store.create_article(args.kb, args.title, read_content(args, True),
                                      published=not args.draft, actor=args.actor)
    print(article_id, file=out)


def cmd_save(store, args, out):
    """A person's save (last writer wins); prints the new version."""
    print(store.save_article(args.kb, args.article, content=read_content(args, False),
                             title=args.title, actor=args.actor, summary=args.summary),
          file=out)


def cmd_publish(store, args, out):
    """Publish an article; prints its version."""
    print(store.publish(args.kb, args.article, actor=args.actor), file=out)


def cmd_unpublish(store, args, out):
    """Unpublish an article; prints its version."""
    print(store.unpublish(args.kb, args.article, actor=args.actor), file=out)


def cmd_list(store, args, out):
    """List every article of a knowledge base, drafts included."""
    rows = store.list_articles(args.kb)
    if args.json:
        return print_json(rows, out)
    print(table(["ARTICLE", "STATE", "VERSION", "SOURCE", "TITLE"],
                [[r["article_id"], "published" if r["published"] else "draft", r["updated_at"],
                  r["source"] or "-", r["title"]] for r in rows]), file=out)


def tool(store, args, name, arguments):
    """Run one of the agent's tools for the knowledge base the command names."""
    return store.call_tool(name, arguments, granted={args.kb}, actor=args.actor)


def cmd_search(store, args, out):
    """Search the published articles, as an agent does."""
    arguments = {"knowledge_base_id": args.kb, "query": args.query}
    if args.limit is not None:
        arguments["limit"] = args.limit
    found = tool(store, args, "search_knowledge_base", arguments)
    if args.json:
        return print_json(found, out)
    if not found["results"]:
        print("no published article matches %r" % args.query, file=out)
        return
    lines = table(["ARTICLE", "VERSION", "TITLE"],
                  [[h["article_id"], h["updated_at"], h["title"]] for h in found["results"]]
                  ).split("\n")
    print(lines[0], file=out)
    for line, hit in zip(lines[1:], found["results"]):
        print(line, file=out)
        print("    %s" % one_line(hit["snippet"], 100), file=out)


def cmd_read(store, args, out):
    """Read a published article as an agent does: its citation, then its content."""
    try:
        article = tool(store, args, "read_knowledge_article",
                       {"knowledge_base_id": args.kb, "article_id": args.article})
    except NotFound:
        state = store.get_article(args.kb, args.article)  # raises for a missing one
        raise CommandError(
            "article %s in knowledge base %s is a draft (version %s): agents cannot read it "
            "until it is published (kb publish %s %s)" % (args.article, args.kb,
                                                        state["updated_at"], args.kb, args.article),
        ) from None
    if args.json:
        return print_json(article, out)
    print("title:    %s" % article["title"], file=out)
    print("article:  %s" % article["article_id"], file=out)
    print("version:  %s" % article["updated_at"], file=out)
    print("citation: %s" % json.dumps(article["citation"], ensure_ascii=False), file=out)
    print("", file=out)
    print(article["content"], file=out)


def cmd_edit(store, args, out):
    """The agent's edit: compare-and-swap on --expected-version, exit 3 if it is stale."""
    arguments = {"knowledge_base_id": args.kb, "article_id": args.article,
                 "content": read_content(args, True),
                 "expected_version": args.expected_version,
                 "idempotency_key": args.idempotency_key or "kb-cli-%s" % uuid.uuid4()}
    if args.title is not None:
        arguments["title"] = args.title
    if args.summary is not None:
        arguments["summary"] = args.summary
    try:
        result = tool(store, args, "edit_knowledge_article", arguments)
    except VersionConflict as exc:
        if args.json:
            print_json({"error": exc.to_dict()}, out)
        raise Conflict(person_message(exc)) from None
    if args.json:
        return print_json(result, out)
    print("%s %s: version %s (was %s), event %d" % (
        "replayed" if result["replayed"] else "edited", result["article_id"],
        result["updated_at"], result["previous_version"], result["event"]["sequence"]),
        file=out)


def cmd_events(store, args, out):
    """Print the event log from --after on, every page of it, as the pages arrive, with who
    made each change."""
    after, events, page = args.after, [], None
    line = "%8s  %-19s  %-10s  %-27s  %s"
    while page is None or page["has_more"]:
        page = store.events(args.kb, after)
        if args.json:
            events += page["events"]
        else:
            if after == args.after and page["events"]:
                print(line % ("SEQ", "TYPE", "ARTICLE", "VERSION", "ACTOR"), file=out)
            for event in page["events"]:
                print(line % (event["sequence"], event["type"], event["article_id"],
                              event["updated_at"], event["actor"] or "-"), file=out)
        after = page["next_after_sequence"]
    if args.json:
        print_json(dict(page, events=events, next_after_sequence=page["head_sequence"]), out)


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


def cmd_audit(store, args, out):
    """Check the stored data; exit 1 if anything is inconsistent."""
    problems = store.audit()
    if args.json:
        print_json({"problems": problems}, out)
    else:
        for problem in problems:
            print(problem, file=out)
        print("audit: %s" % ("%d problem(s)" % len(problems) if problems else "ok"), file=out)
    return EXIT_ERROR if problems else EXIT_OK


def cmd_reindex(store, args, out):
    """Index a knowledge base's published articles anew (what the audit or a damaged-index
    error asks for)."""
    store.rebuild_index(args.kb)
    if args.json:
        return print_json({"knowledge_base_id": args.kb, "reindexed": True}, out)
    print("reindexed %s" % args.kb, file=out)


def cmd_token(store, args, out):
    """Bearer tokens for the HTTP server: create (printed once), list, revoke."""
    if args.token_command == "create":
        token = store.create_token(args.name, args.grant, args.writes)
        if args.json:
            return print_json({"name": args.name, "token": token, "grants": args.grant,
                               "writes": args.writes}, out)
        print(token, file=out)
        print("%s: token %s grants %s, writes %s; it is shown only now: keep it where its "
              "client can read it" % (PROG, args.name, ", ".join(args.grant), args.writes),
              file=sys.stderr)
    elif args.token_command == "list":
        rows = store.list_tokens()
        if args.json:
            return print_json(rows, out)
        print(table(["NAME", "WRITES", "CREATED", "REVOKED", "GRANTS"],
                    [[r["name"], r["writes"], r["created_at"], r["revoked_at"] or "-",
                      ", ".join(r["grants"])] for r in rows]), file=out)
    else:
        print("revoked token %s at %s" % (args.name, store.revoke_token(args.name)), file=out)


def cmd_history(store, args, out):
    """An article's versions (or, as ``history prune KB``, prune a knowledge base's)."""
    if args.prune is not None:
        return history_prune(store, args, out)
    rows = store.history(args.kb, args.article)
    if args.json:
        return print_json(rows, out)
    print(table(["VERSION", "ACTION", "ACTOR", "EVENT", "BYTES", "CHANGE", "SUMMARY"], [
        [r["updated_at"] + (" *" if r["current"] else ""),
         r["action"] + ("" if r["published"] else " (draft)"), r["actor"] or "-",
         r["event"] or "-", "%d%s" % (r["bytes"], " pruned" if r["pruned"] else ""),
         "%+d" % r["bytes_change"], r["summary"] or ""] for r in rows]), file=out)


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
    to = args.to or versions[-1]
    if args.from_ is not None:
        start = args.from_
    else:
        before = [v for v in versions if v < to] if to in versions else versions[:-1]
        start = before[-1] if before else to
    texts = store.version_texts(args.kb, args.article, [start, to])
    (old_title, old), (new_title, new) = texts[start], texts[to]
    lines = list(difflib.unified_diff(
        ["title: %s\n" % old_title, "\n"] + old.splitlines(True),
        ["title: %s\n" % new_title, "\n"] + new.splitlines(True),
        "%s@%s" % (args.article, start), "%s@%s" % (args.article, to)))
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
        if args.json:
            print_json({"error": exc.to_dict()}, out)
        raise Conflict(person_message(exc)) from None
    if args.json:
        return print_json(dict(result, knowledge_base_id=args.kb, article_id=args.article,
                               reverted_to=args.to), out)
    event = result["event"]
    print("reverted %s to %s: version %s%s" % (
        args.article, args.to, result["updated_at"],
        ", event %d" % event["sequence"] if event else " (a draft: no event)"), file=out)


COMMANDS = {
    "init": cmd_init, "knowledge-bases": cmd_knowledge_bases, "add": cmd_add, "save": cmd_save,
    "publish": cmd_publish, "unpublish": cmd_unpublish, "list": cmd_list, "search": cmd_search,
    "read": cmd_read, "edit": cmd_edit, "events": cmd_events, "import": cmd_import,
    "audit": cmd_audit, "reindex": cmd_reindex, "token": cmd_token, "history": cmd_history,
    "diff": cmd_diff, "revert": cmd_revert,
    "upgrade": None,  # upgrade opens the store its own way (main)
}


# -- the parser --------------------------------------------------------------------------------


def build_parser():
    """The command line: global options, then one subcommand with its own."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: given after the subcommand it overrides the one given before, never erases it.
    common.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS,
                        help="the store file (default: $KB_DB)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print JSON (what the tools return) instead of a table")
    common.add_argument("--actor", metavar="NAME", default=argparse.SUPPRESS,
                        help="who the history says made this command's changes (default: "
                             "$USER)")
    parser = argparse.ArgumentParser(
        prog=PROG, parents=[common],
        description="Administer a knowledge-base store whose citations are version stamps.",
        epilog="Exit status: 0 done, 1 error, 2 usage, 3 conflict. The store is --db PATH or "
               "$KB_DB; every command also takes --db and --json after its name.")
    parser.add_argument("--version", action="version", version="%s %s (store schema %d)"
                        % (PROG, __version__, SCHEMA_VERSION))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                help="what to do; kb COMMAND --help tells more")
    sub.required = True

    def command(name, help_text, aliases=()):
        return sub.add_parser(name, parents=[common], help=help_text, description=help_text,
                              aliases=list(aliases))

    def kb_arg(p):
        p.add_argument("kb", metavar="KB", help="the knowledge base's ID")

    def article_arg(p):
        p.add_argument("article", metavar="ARTICLE", help="an article ID, e.g. art-000001")

    def summary_arg(p):
        p.add_argument("--summary", metavar="TEXT",
                       help="why, in a line, for the article's history")

    def content_args(p, what):
        text = p.add_mutually_exclusive_group()
        text.add_argument("--file", metavar="F",
                          help="read %s from the UTF-8 file F (- for standard input)" % what)
        text.add_argument("--content", metavar="TEXT", help="%s itself" % what)

    p = command("init", "create a knowledge base (and the store file, if it is new)")
    kb_arg(p)
    p.add_argument("--name", help="a display name for the knowledge base")

    command("knowledge-bases", "list the store's knowledge bases", aliases=["kbs"])

    p = command("add", "add an article (content from --file, --content or standard input)")
    kb_arg(p)
    p.add_argument("--title", required=True, help="the article's title")
    content_args(p, "the content")
    p.add_argument("--draft", action="store_true", help="add it unpublished")

    p = command("save", "a person's save of an article (last writer wins)")
    kb_arg(p)
    article_arg(p)
    p.add_argument("--title", help="a new title")
    content_args(p, "the new content (default: keep it)")
    summary_arg(p)

    for name, text in (("publish", "make an article visible to agents"),
                       ("unpublish", "hide an article from agents (its text is kept)")):
        p = command(name, text)
        kb_arg(p)
        article_arg(p)

    p = command("list", "list every article of a knowledge base, drafts included")
    kb_arg(p)

    p = command("search", "search the published articles, as an agent's search does")
    kb_arg(p)
    p.add_argument("query", metavar="QUERY", help="words to look for (2-200 characters)")
    p.add_argument("--limit", type=int, metavar="N",
                   help="most hits (1-%d, default %d)" % (SEARCH_LIMIT_MAX,
                                                          SEARCH_LIMIT_DEFAULT))

    p = command("read", "read a published article and its citation, as an agent's read does")
    kb_arg(p)
    article_arg(p)

    p = command("edit", "edit an article as an agent does: only if it is still at "
                        "--expected-version (exit 3 if not)")
    kb_arg(p)
    article_arg(p)
    p.add_argument("--expected-version", required=True, metavar="V",
                   help="the version (updated_at) you read; the edit is refused if it changed")
    p.add_argument("--title", help="a new title (default: keep it)")
    content_args(p, "the whole new content")
    p.add_argument("--idempotency-key", metavar="K",
                   help="resending with the same key returns the first result and writes "
                        "nothing (default: a new random key)")
    summary_arg(p)

    p = command("history", "an article's versions: time, how, who, the event, size, summary "
                           "(or: history prune KB --keep-days N)")
    p.add_argument("kb", metavar="KB", help="the knowledge base's ID (or the word prune)")
    p.add_argument("article", metavar="ARTICLE",
                   help="an article ID (or, after prune, the knowledge base's ID)")
    p.add_argument("--keep-days", type=int, metavar="N",
                   help="history prune: keep the versions of the last N days (and every "
                        "article's current one); drop the texts of older ones")
    p.add_argument("--yes", action="store_true",
                   help="history prune: do it (without --yes it says what it would prune)")

    p = command("diff", "a unified diff between two versions of an article")
    kb_arg(p)
    article_arg(p)
    p.add_argument("--from", dest="from_", metavar="V",
                   help="the older version (default: the one before --to)")
    p.add_argument("--to", metavar="V", help="the newer version (default: the current one)")

    p = command("revert", "a new version holding an older version's title and content, only "
                          "if the article is still at --expected-version (exit 3 if not)")
    kb_arg(p)
    article_arg(p)
    p.add_argument("--to", required=True, metavar="V", help="the version to bring back")
    p.add_argument("--expected-version", required=True, metavar="CUR",
                   help="the current version, as kb history shows it")
    summary_arg(p)

    p = command("events", "print a knowledge base's event log")
    kb_arg(p)
    p.add_argument("--after", type=int, default=0, metavar="N",
                   help="only events after sequence N (default 0: all)")

    p = command("import", "sync a folder of Markdown files into a knowledge base")
    kb_arg(p)
    p.add_argument("directory", metavar="FOLDER", help="the folder; every *.md below it")
    p.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    p.add_argument("--prune", action="store_true",
                   help="unpublish articles whose file is gone")
    p.add_argument("--force", action="store_true",
                   help="overwrite articles edited since the last import with their files")

    command("audit", "check the stored data for inconsistencies (exit 1 if any)")

    p = command("reindex", "rebuild a knowledge base's search index from its articles")
    kb_arg(p)

    p = command("token", "bearer tokens for kb-server --http: create, list, revoke")
    tokens = p.add_subparsers(dest="token_command", metavar="ACTION",
                              help="create NAME --grant KB..., list, or revoke NAME")
    tokens.required = True
    t = tokens.add_parser("create", parents=[common], help="make a token; it is printed once",
                          description="Make a bearer token that grants knowledge bases; it is "
                                      "printed once and only its SHA-256 is kept.")
    t.add_argument("name", metavar="NAME", help="a name for the token (who or what holds it)")
    t.add_argument("--grant", action="append", required=True, metavar="KB",
                   help="a knowledge base the token may use; repeat for several")
    t.add_argument("--writes", choices=WRITE_MODES, default="ask",
                   help="ask: a person approves each edit (default); allow: edits go through; "
                        "deny: read only")
    tokens.add_parser("list", parents=[common], help="list the tokens (never the tokens "
                      "themselves)", description="List the tokens: name, grants, writes, "
                      "created, revoked.")
    t = tokens.add_parser("revoke", parents=[common], help="revoke a token at once",
                          description="Revoke a token: its next request is refused.")
    t.add_argument("name", metavar="NAME", help="the token's name")
    command("upgrade", "bring a store made by an older version up to this one's schema")
    return parser


def parse(argv):
    """Parsed arguments, with --db from $KB_DB where it was not given."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.json = getattr(args, "json", False)
    if getattr(args, "db", None) is None:
        args.db = os.environ.get("KB_DB") or None
    if not args.db:
        parser.error("no store given: pass --db PATH or set KB_DB")
    args.command = {"kbs": "knowledge-bases"}.get(args.command, args.command)
    if getattr(args, "actor", None) is None:
        args.actor = login_name()
    if args.command == "history":
        # ``history prune KB --keep-days N`` prunes; ``history KB ART`` lists.
        args.prune = None
        if args.kb == "prune" and args.keep_days is not None:
            args.prune, args.kb, args.article = args.article, args.article, None
        elif args.keep_days is not None or args.yes:
            parser.error("--keep-days and --yes belong to: kb history prune KB --keep-days N")
    return args


def main(argv=None):
    """The admin command line; returns the exit status."""
    args = parse(argv)
    out = sys.stdout
    try:
        if args.command == "upgrade":
            old, new = KBStore.upgrade(args.db)
            print("upgraded %s from schema %d to %d" % (args.db, old, new) if old != new
                  else "%s is already at schema %d" % (args.db, new), file=out)
            status = EXIT_OK
        else:
            with KBStore(args.db, create=args.command == "init") as store:
                status = COMMANDS[args.command](store, args, out)
        out.flush()
    except Conflict as exc:
        print("%s: conflict: %s" % (PROG, exc), file=sys.stderr)
        return EXIT_CONFLICT
    except ToolError as exc:
        print("%s: error: %s" % (PROG, person_message(exc)), file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader went away (``kb events | head``): stop quietly, and keep Python from
        # complaining again while it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return 130
    return status or EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
