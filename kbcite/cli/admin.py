"""The commands on the store itself: init, knowledge-bases, audit, reindex, token."""

import sys

from .messages import EXIT_ERROR, EXIT_OK, PROG
from .output import emit, print_json

# -- the commands ------------------------------------------------------------------------------


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
