"""The commands on articles: the people's side (add, save, publish, unpublish, list) and the
agents' own tools run for a person (search, read, edit, events)."""

import json
import sys
import uuid

from ..errors import InvalidArgument, NotFound, VersionConflict
from ..markdown import read_utf8_file
from .messages import CommandError, Conflict, person_message
from .output import one_line, print_json, table

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
