"""The commands on the store itself: init, knowledge-bases, audit, reindex, token."""

import sys

from .messages import EXIT_ERROR, EXIT_OK, PROG
from .output import print_json, table

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
