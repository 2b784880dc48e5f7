"""The commands on the store itself: init, knowledge-bases, dump, restore, audit, reindex,
token."""

import json
import os
import sys
import urllib.parse

from ..exporter import place_problem, write_atomically
from ..markdown import decode_utf8
from .messages import EXIT_ERROR, EXIT_OK, PROG, CommandError
from .output import emit, print_json

# -- the commands ------------------------------------------------------------------------------


def cmd_dump(store, args, out):
    """Write a knowledge base to a dump file (``-``: standard output), whole or not at all."""
    data = store.dump_knowledge_base(args.kb)
    text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    if args.file == "-":
        out.write(text)
        return None
    if os.path.lexists(args.file) and not args.yes:
        raise CommandError("%s is there already; nothing was written (--yes overwrites it)"
                           % args.file, argument="FILE")
    if os.path.isdir(args.file):
        raise CommandError("%s is a folder: name the dump's file" % args.file, argument="FILE")
    folder = os.path.dirname(os.path.abspath(args.file))
    problem = place_problem(folder, os.path.basename(args.file))
    if problem is not None and not os.path.exists(args.file):
        raise CommandError("cannot write %s: %s; nothing was written" % (args.file, problem),
                           argument="FILE")
    try:
        write_atomically(args.file, text, special=True)  # /dev/stdout, a pipe: written to
    except OSError as exc:
        raise CommandError("cannot write %s: %s; nothing was written"
                           % (args.file, exc.strerror), argument="FILE") from None
    summary = {"knowledge_base_id": data["knowledge_base_id"], "file": args.file,
               "articles": len(data["articles"]), "events": len(data["events"])}
    if args.json:
        return print_json(summary, out)
    print("dumped %s to %s: %d article(s), %d event(s)" % (
        data["knowledge_base_id"], args.file, summary["articles"], summary["events"]), file=out)
    return None


def cmd_restore(store, args, out):
    """Make a knowledge base from a dump file (``-``: standard input)."""
    if args.file == "-":
        raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else \
            sys.stdin.read().encode("utf-8")
    else:
        try:
            with open(args.file, "rb") as fh:
                raw = fh.read()
        except OSError as exc:
            raise CommandError("cannot read %s: %s" % (args.file, exc.strerror),
                               argument="FILE") from None
    name = "standard input" if args.file == "-" else args.file
    try:
        data = json.loads(decode_utf8(raw, "%s (a kb dump)" % name, "FILE"))
    except ValueError as exc:
        raise CommandError("%s is not a kb dump (not JSON: %s)" % (name, exc),
                           argument="FILE") from None
    made = store.restore_knowledge_base(data, as_id=args.as_kb)
    if args.json:
        return print_json(made, out)
    print("restored %s: %d article(s), %d version(s), %d event(s)" % (
        made["knowledge_base_id"], made["articles"], made["versions"], made["events"]),
        file=out)
    return None


def cmd_init(store, args, out):
    """Create the knowledge base KB (and the store, if the file is new)."""
    store.create_knowledge_base(args.kb, args.name)
    if args.json:
        return print_json({"knowledge_base_id": args.kb, "name": args.name,
                           "store": args.db}, out)
    print("created knowledge base %s in %s" % (args.kb, args.db), file=out)
    return None


KB_COLUMNS = [
    ("knowledge_base_id", "KB", lambda r: r["knowledge_base_id"]),
    ("published", "PUBLISHED", lambda r: r["published"]),
    ("articles", "ARTICLES", lambda r: r["articles"]),
    ("head_sequence", "EVENTS", lambda r: r["head_sequence"]),
    ("name", "NAME", lambda r: r["name"] or ""),
]
TOKEN_COLUMNS = [
    ("name", "NAME", lambda r: r["name"]),
    ("writes", "WRITES", lambda r: r["writes"]),
    ("review", "REVIEW", lambda r: "yes" if r["review"] else "no"),
    ("created_at", "CREATED", lambda r: r["created_at"]),
    ("revoked_at", "REVOKED", lambda r: r["revoked_at"] or "-"),
    ("grants", "GRANTS", lambda r: ", ".join(r["grants"])),
]
GRANT_COLUMNS = [
    ("kind", "KIND", lambda r: r["kind"]),
    ("name", "NAME", lambda r: r["name"]),
    ("knowledge_base_id", "KB", lambda r: r["knowledge_base_id"]),
    ("writes", "WRITES", lambda r: r["writes"]),
    ("created_at", "CREATED", lambda r: r["created_at"]),
]


def cmd_knowledge_bases(store, args, out):
    """List the knowledge bases of the store."""
    rows = store.list_knowledge_bases()
    if args.json:
        return print_json(rows, out)
    return emit(rows, KB_COLUMNS, args, out)


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


def cmd_grant(store, args, out):
    """A team issuer's people and groups: add, list, remove what they may use."""
    if args.grant_command == "list":
        rows = store.grants.list()
        if args.json:
            return print_json(rows, out)
        return emit(rows, GRANT_COLUMNS, args, out)
    kind, name = ("subject", args.subject) if args.subject is not None else ("group", args.group)
    if args.grant_command == "add":
        store.grants.add(kind, name, args.kb, args.writes)
        if args.json:
            return print_json({"kind": kind, "name": name, "knowledge_base_id": args.kb,
                               "writes": args.writes}, out)
        print("granted %s %s knowledge base %s, writes %s" % (kind, name, args.kb, args.writes),
              file=out)
    else:
        store.grants.remove(kind, name, args.kb)
        if args.json:
            return print_json({"kind": kind, "name": name, "knowledge_base_id": args.kb,
                               "removed": True}, out)
        print("removed the grant of knowledge base %s to %s %s" % (args.kb, kind, name),
              file=out)
    return None


def cmd_token(store, args, out):
    """Bearer tokens for the HTTP server: create (printed once), list, revoke, link."""
    if args.token_command == "create":
        token = store.tokens.create(args.name, args.grant, args.writes, review=args.review)
        if args.json:
            return print_json({"name": args.name, "token": token, "grants": args.grant,
                               "writes": args.writes, "review": args.review}, out)
        print(token, file=out)
        print("%s: token %s grants %s, writes %s; it is shown only now: keep it where its "
              "client can read it" % (PROG, args.name, ", ".join(args.grant), args.writes),
              file=sys.stderr)
    elif args.token_command == "list":
        rows = store.tokens.list()
        if args.json:
            return print_json(rows, out)
        return emit(rows, TOKEN_COLUMNS, args, out)
    elif args.token_command == "link":
        parts = urllib.parse.urlsplit(args.url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
            raise CommandError("--url %r is not the server's address: give it as its people "
                               "reach it, http://HOST:PORT or https://HOST; no link was made"
                               % args.url, argument="--url")
        url = "%s/login/link?code=%s" % (args.url.rstrip("/"), store.tokens.link(args.name))
        if args.json:
            return print_json({"name": args.name, "link": url}, out)
        print(url, file=out)
    else:
        revoked_at = store.tokens.revoke(args.name)
        if args.json:
            return print_json({"name": args.name, "revoked_at": revoked_at}, out)
        print("revoked token %s at %s" % (args.name, revoked_at), file=out)
    return None
