"""The commands on articles: the people's side (add, save, publish, unpublish, delete, list)
and the agents' own tools run for a person (search, read, edit, events)."""

import json
import os
import stat
import sys
import uuid

from ..errors import InvalidArgument, NotFound, VersionConflict
from ..markdown import decode_utf8, parse_document, read_utf8_file, title_from_name
from .messages import PROG, CommandError
from .output import actor_text, emit, marked, one_line, print_json, stale, table

# What a save that changed nothing says, on standard error (standard output keeps the
# version alone, for scripts).
UNCHANGED = "%s: unchanged: %%s already holds this title and text; no version was made (it is " \
    "still at %%s)" % PROG


def read_stdin():
    """Standard input as UTF-8 text, refused as a file is when it is not UTF-8."""
    raw = getattr(sys.stdin, "buffer", None)
    if raw is None:  # a text stream without bytes beneath (a test's StringIO)
        return sys.stdin.read()
    text = decode_utf8(raw.read(), "standard input", "--file")
    return text[1:] if text.startswith("\ufeff") else text


def _piped():
    """Whether standard input is a pipe or a file (not a terminal, nor /dev/null, nor a socket
    a parent left open), so that a command whose content is optional may read it."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return not sys.stdin.isatty()  # a test's StringIO: what it holds was given
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def read_content(args, required):
    """The content of ``--file`` (``-``: standard input), ``--content``, or, where neither is
    given, piped standard input (where the command needs content, or where the pipe holds
    some: ``cat new.md | kb save ...``); else ``None``."""
    if args.file == "-":
        return read_stdin()
    if args.file is not None:
        text = read_utf8_file(args.file, "--file %s" % args.file, "--file")
        return text[1:] if text.startswith("\ufeff") else text
    if args.content is not None:
        return args.content
    if required and not sys.stdin.isatty():  # piped in: ``cat new.md | kb edit ...``
        return read_stdin()
    if not required and _piped():  # ``cat new.md | kb save ...``; else a title alone
        text = read_stdin()
        if text:
            return text
    if not required:
        return None
    raise InvalidArgument("give the content with --file F, --content TEXT, or on standard "
                          "input", argument="--content")


def markdown_file(args, content, fallback=None):
    """``(title or None, content)``: ``--file``'s text read as import reads Markdown (front
    matter and a first ``# `` heading give the title, ``fallback`` where neither does), or
    as it is with ``--raw``, or where the content came from elsewhere."""
    if content is None or args.file is None or args.raw:
        return None, content
    try:
        title, body, _ = parse_document(content, fallback)
    except ValueError as exc:
        raise CommandError("--file %s cannot be read as import reads Markdown: %s (--raw "
                           "takes it as it is)" % (args.file, exc), argument="--file") from None
    return title, body


def version_result(args, updated_at, out, **extra):
    """What a command that makes a version prints: the version, or with --json the article
    and its version under the tools' names."""
    if args.json:
        return print_json(dict({"knowledge_base_id": args.kb, "article_id": args.article,
                                "updated_at": updated_at}, **extra), out)
    print(updated_at, file=out)
    return None


def cmd_add(store, args, out):
    """Add an article; prints its ID."""
    named = None if args.file in (None, "-") else title_from_name(args.file)
    found, content = markdown_file(args, read_content(args, True), named)
    title = args.title if args.title is not None else found
    if title is None:
        raise CommandError("give the article a title: --title T, or a # heading or front "
                           "matter title in --file", argument="--title")
    article_id = store.create_article(args.kb, title, content, published=not args.draft,
                                      actor=args.actor)
    if args.json:
        article = store.get_article(args.kb, article_id)
        return print_json({"knowledge_base_id": args.kb, "article_id": article_id,
                           "title": article["title"], "updated_at": article["updated_at"],
                           "published": bool(article["published"])}, out)
    print(article_id, file=out)
    return None


def cmd_save(store, args, out):
    """A person's save (last writer wins); prints the article's version after it, and says
    on standard error when the save changed nothing (no version made)."""
    found, content = markdown_file(args, read_content(args, False))
    done = store.save(args.kb, args.article, content=content,
                      title=args.title if args.title is not None else found,
                      actor=args.actor, summary=args.summary)
    if not done["changed"] and not args.json:
        print(UNCHANGED % (args.article, done["updated_at"]), file=sys.stderr)
    return version_result(args, done["updated_at"], out, changed=done["changed"])


def cmd_publish(store, args, out):
    """Publish an article; prints its version."""
    return version_result(args, store.publish(args.kb, args.article, actor=args.actor), out,
                          published=True)


def cmd_unpublish(store, args, out):
    """Unpublish an article; prints its version."""
    return version_result(args, store.unpublish(args.kb, args.article, actor=args.actor), out,
                          published=False)


def cmd_delete(store, args, out):
    """Delete an article for good (--yes): text and history; a published one's deletion is an
    event, so its citations come back gone."""
    article = store.get_article(args.kb, args.article)  # says so if there is none
    returns = ("" if not article["source"] else
               "; it was imported from %s, so the next import of that folder makes it again "
               "under a new article ID (delete the file too, or kb unpublish keeps the ID)"
               % article["source"])
    if not args.yes:
        if args.json:
            return print_json({"knowledge_base_id": args.kb, "article_id": args.article,
                               "deleted": False, "source": article["source"],
                               "versions": len(store.history(args.kb, args.article))}, out)
        print("plan (nothing deleted): kb delete removes %s (%r, %d version(s)) and its whole "
              "history for good%s; run it again with --yes to delete it (kb unpublish only "
              "hides it)" % (args.article, article["title"],
                             len(store.history(args.kb, args.article)), returns), file=out)
        return None
    event = store.delete_article(args.kb, args.article, actor=args.actor)
    if returns and not args.json:
        print("%s: warning: %s was deleted%s" % (PROG, args.article, returns), file=sys.stderr)
    if args.json:
        return print_json({"knowledge_base_id": args.kb, "article_id": args.article,
                           "deleted": True, "event": event}, out)
    print("deleted %s%s" % (args.article, ", event %d" % event["sequence"] if event
                            else " (a draft: no event)"), file=out)
    return None


LIST_COLUMNS = [
    ("article_id", "ARTICLE", lambda r: r["article_id"]),
    ("published", "STATE", lambda r: "published" if r["published"] else "draft"),
    ("updated_at", "VERSION", lambda r: r["updated_at"]),
    ("chars", "CHARS", lambda r: r["chars"]),
    ("source", "SOURCE", lambda r: r["source"] or "-"),
    ("title", "TITLE", lambda r: r["title"]),
]


def cmd_list(store, args, out):
    """List every article of a knowledge base, drafts included."""
    rows = store.list_articles(args.kb)
    if args.json:
        return print_json(rows, out)

    def default(rows, out):
        print(table(["ARTICLE", "STATE", "VERSION", "SOURCE", "TITLE"],
                    [[c(r) for name, _, c in LIST_COLUMNS if name != "chars"] for r in rows]),
              file=out)
    return emit(rows, LIST_COLUMNS, args, out, default)


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

    def default(hits, out):
        if not hits:
            print("no published article matches %r" % args.query, file=out)
            return
        lines = table(["ARTICLE", "VERSION", "TITLE"],
                      [[h["article_id"], h["updated_at"], h["title"]] for h in hits]).split("\n")
        print(lines[0], file=out)
        for line, hit in zip(lines[1:], hits):
            print(line, file=out)
            print("    %s" % marked(one_line(hit["snippet"], 100), out), file=out)
    return emit(found["results"], SEARCH_COLUMNS, args, out, default)


SEARCH_COLUMNS = [
    ("article_id", "ARTICLE", lambda h: h["article_id"]),
    ("updated_at", "VERSION", lambda h: h["updated_at"]),
    ("title", "TITLE", lambda h: h["title"]),
    ("source", "SOURCE", lambda h: h["source"] or ""),
    ("snippet", "SNIPPET", lambda h: one_line(h["snippet"], 100)),
    ("citation", "CITATION", lambda h: json.dumps(h["citation"], ensure_ascii=False)),
    # Which half of search found it: lexical, semantic or both (kbcite[semantic]).
    ("match", "MATCH", lambda h: h.get("match", "lexical")),
]


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
    """The agent's edit: compare-and-swap on --expected-version, exit 3 if it is stale.
    ``--title`` alone retitles: the content stays as it is."""
    found, content = markdown_file(args, read_content(args, args.title is None))
    title = args.title if args.title is not None else found
    if content is None:
        content = store.get_article(args.kb, args.article)["content"]
    arguments = {"knowledge_base_id": args.kb, "article_id": args.article,
                 "content": content,
                 "expected_version": args.expected_version,
                 "idempotency_key": "kb-cli-%s" % uuid.uuid4() if args.idempotency_key is None
                 else args.idempotency_key}
    if title is not None:
        arguments["title"] = title
    if args.summary is not None:
        arguments["summary"] = args.summary
    try:
        result = tool(store, args, "edit_knowledge_article", arguments)
    except VersionConflict as exc:
        raise stale(exc, args, out) from None
    if args.json:
        return print_json(result, out)
    if not result.get("changed", True):
        print("%s %s: version %s; unchanged: it already held this title and text, so no "
              "version and no event were made" % (
                  "replayed" if result["replayed"] else "edited", result["article_id"],
                  result["updated_at"]), file=out)
        return None
    print("%s %s: version %s (was %s), event %d" % (
        "replayed" if result["replayed"] else "edited", result["article_id"],
        result["updated_at"], result["previous_version"], result["event"]["sequence"]),
        file=out)


def who(event):
    """Who made an event's change: its actor, the person who approved it, the proposal."""
    text = actor_text(event["actor"], event.get("actor_issuer"))
    if event.get("approver"):
        text += " (approved by %s)" % event["approver"]
    if event.get("proposal_id") is not None:
        text += " (proposal %d)" % event["proposal_id"]
    return text


EVENT_COLUMNS = [
    ("sequence", "SEQ", lambda e: e["sequence"]),
    ("type", "TYPE", lambda e: e["type"]),
    ("article_id", "ARTICLE", lambda e: e["article_id"]),
    ("updated_at", "VERSION", lambda e: e["updated_at"]),
    ("actor", "ACTOR", who),
]


def cmd_events(store, args, out):
    """Print the event log from --after on, every page of it, as the pages arrive, with who
    made each change."""
    after, events, page = args.after, [], None
    line = "%8s  %-19s  %-10s  %-27s  %s"
    streaming = not args.json and (getattr(args, "format", None) or "table") == "table" \
        and not getattr(args, "fields", None)
    while page is None or page["has_more"]:
        page = store.events(args.kb, after)
        if streaming:
            # Page by page as they come: a long log starts printing at once.
            if after == args.after and page["events"]:
                print(line % ("SEQ", "TYPE", "ARTICLE", "VERSION", "ACTOR"), file=out)
            for event in page["events"]:
                print(line % (event["sequence"], event["type"], event["article_id"],
                              event["updated_at"], who(event)), file=out)
        else:
            events += page["events"]
        after = page["next_after_sequence"]
    if args.json:
        return print_json(dict(page, events=events, next_after_sequence=page["head_sequence"]),
                          out)
    if not streaming:
        return emit(events, EVENT_COLUMNS, args, out)
    return None
