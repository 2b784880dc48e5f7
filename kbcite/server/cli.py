"""The kb-server command line: parse the arguments, open the store, run one transport.

    kb-server --db PATH --grant KB [--grant KB ...] [--writes ask|allow|deny]   # stdio
    kb-server --db PATH --http 127.0.0.1:8765                                    # HTTP, /mcp

stdout carries protocol messages only (stdio); everything else, logs included, goes to stderr.
"""

import argparse
import contextlib
import io
import logging
import os
import secrets
import sys

from ..errors import ToolError
from ..limits import ACTOR_MAX
from ..store import KBStore
from ..tokens import WRITE_MODES
from .approval import APPROVAL_TTL_S, ApprovalSigner
from .http import (IDLE_TIMEOUT_S, MAX_BODY, MAX_CONNECTIONS, MCP_PATH, REQUEST_TIMEOUT_S,
                   HttpTransport)
from .pool import QUEUED_EDITS, StorePool
from .protocol import SERVER_NAME, Principal, Protocol
from .stdio import WORKERS, StdioTransport

log = logging.getLogger(__name__)


def build_parser():
    """The command line: a store, the transport, and who may do what."""
    parser = argparse.ArgumentParser(
        prog="kb-server",
        description="MCP server for a knowledge-base store: stdio (one client, --grant) or "
                    "Streamable HTTP (--http, bearer tokens from kb token create).",
    )
    parser.add_argument("--db", metavar="PATH", default=os.environ.get("KB_DB") or None,
                        required=not os.environ.get("KB_DB"),
                        help="an existing store, made by: kb init --db PATH KB; a file or a "
                             "postgresql:// URL (default: $KB_DB)")
    parser.add_argument("--grant", action="append", metavar="KB",
                        help="stdio: a knowledge base the agent may use; repeat for several "
                             "(over HTTP, each token carries its own grants)")
    parser.add_argument("--writes", choices=WRITE_MODES, default="ask",
                        help="stdio: ask: a person approves every edit through the client "
                             "(default); allow: edit without asking; deny: read only (over "
                             "HTTP, each token carries its own)")
    parser.add_argument("--actor", default=SERVER_NAME, metavar="NAME",
                        help="stdio: who the history says made this agent's edits (default "
                             "%%(default)s; over HTTP, each token's name)")
    parser.add_argument("--http", metavar="HOST:PORT",
                        help="serve Streamable HTTP on http://HOST:PORT/mcp instead of stdio; "
                             "bind to 127.0.0.1 unless other machines must reach it")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="HTTP: a browser Origin allowed besides the server's own loopback "
                             "addresses (repeat for several)")
    parser.add_argument("--max-body", type=int, default=MAX_BODY, metavar="BYTES",
                        help="HTTP: the largest request body (default %d)" % MAX_BODY)
    parser.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS, metavar="N",
                        help="HTTP: connections served at once; more get 503 (default %d)"
                             % MAX_CONNECTIONS)
    parser.add_argument("--request-timeout", type=float, default=REQUEST_TIMEOUT_S,
                        metavar="S", help="HTTP: a request must arrive whole within S seconds "
                                          "(default %g)" % REQUEST_TIMEOUT_S)
    parser.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT_S, metavar="S",
                        help="HTTP: an idle connection is closed after S seconds (default %g)"
                             % IDLE_TIMEOUT_S)
    parser.add_argument("--workers", type=int, default=WORKERS, metavar="N",
                        help="requests run at once, each on its own store connection "
                             "(default %d)" % WORKERS)
    parser.add_argument("--queued-edits", type=int, default=QUEUED_EDITS, metavar="N",
                        help="edits of one knowledge base that may wait for their turn; one "
                             "more gets store_busy at once (default %d)" % QUEUED_EDITS)
    parser.add_argument("--signing-secret-file", metavar="FILE",
                        help="the secret that signs 2026-07-28 approval handles (default: "
                             "$KB_SIGNING_SECRET, else a random one for this process); servers "
                             "that share a database and this secret can finish each other's "
                             "approvals")
    parser.add_argument("--approval-ttl", type=int, default=APPROVAL_TTL_S, metavar="S",
                        help="how long a 2026-07-28 approval handle is good (default %d s)"
                             % APPROVAL_TTL_S)
    parser.add_argument("--authorization-server", metavar="URL",
                        help="HTTP: the OAuth 2.1 authorization server (a gateway) that issues "
                             "this server's tokens; published as RFC 9728 metadata and in 401 "
                             "challenges")
    return parser


def check_args(parser, args):
    """Refuse a command line that cannot work, naming the argument."""
    if not args.actor.strip() or len(args.actor) > ACTOR_MAX:
        parser.error("argument --actor: a name of 1 to %d characters, got %r"
                     % (ACTOR_MAX, args.actor[:ACTOR_MAX + 1]))
    if args.queued_edits < 0:
        parser.error("argument --queued-edits: must be 0 or more")
    for name in ("max_body", "max_connections", "workers", "approval_ttl"):
        if getattr(args, name) < 1:
            parser.error("argument --%s: must be at least 1" % name.replace("_", "-"))
    for name in ("request_timeout", "idle_timeout"):
        if getattr(args, name) <= 0:
            parser.error("argument --%s: must be positive" % name.replace("_", "-"))
    if args.http:
        if args.grant:
            parser.error("argument --grant: over HTTP each token carries its grants (kb token "
                         "create NAME --grant KB); drop --grant")
        host, _, port = args.http.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            parser.error("argument --http: expected HOST:PORT such as 127.0.0.1:8765, got %r"
                         % args.http)
        args.host, args.port = host.strip("[]"), int(port)
    elif not args.grant:
        parser.error("argument --grant: required for stdio (the knowledge bases the agent may "
                     "use)")
    for kb_id in args.grant or ():
        if not kb_id:
            parser.error("argument --grant: a knowledge-base ID must not be empty")


def open_store(args):
    """The store named by ``--db``, checked against ``--grant``; exits with one line if not
    (the usage would say nothing about a store)."""
    try:
        # Never create=True: a server opens a store that init made, and leaves any other file
        # exactly as it found it.
        store = KBStore(args.db)
    except ToolError as exc:
        sys.exit("kb-server: error: argument --db: %s" % exc.message)
    try:
        missing = [kb_id for kb_id in args.grant or () if not store.knowledge_base_exists(kb_id)]
    except ToolError as exc:
        store.close()
        sys.exit("kb-server: error: argument --db: %s" % exc.message)
    if missing:
        store.close()
        sys.exit("kb-server: error: argument --grant: no knowledge base %s in %s"
                 % (", ".join(repr(kb_id) for kb_id in missing), args.db))
    return store


def signing_secret(parser, args):
    """The approval handles' secret: a file, $KB_SIGNING_SECRET, or random for this process."""
    if args.signing_secret_file:
        try:
            with open(args.signing_secret_file, "rb") as fh:
                secret = fh.read().strip()
        except OSError as exc:
            parser.error("argument --signing-secret-file: cannot read %s: %s"
                         % (args.signing_secret_file, exc.strerror))
        if len(secret) < 16:
            parser.error("argument --signing-secret-file: at least 16 bytes of secret, got %d"
                         % len(secret))
        return secret
    if os.environ.get("KB_SIGNING_SECRET"):
        return os.environ["KB_SIGNING_SECRET"].encode("utf-8")
    log.info("no signing secret given: 2026-07-28 approvals can be finished by this process "
             "only (set KB_SIGNING_SECRET on every server that shares the database)")
    return secrets.token_bytes(32)


def claim_stdout():
    """A private binary handle on the real stdout; stray writes to stdout go to stderr instead.

    At the descriptor level too, so a C extension or a child process that writes to fd 1
    cannot corrupt the protocol stream.
    """
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, io.UnsupportedOperation):
        out = sys.stdout.buffer
    else:
        out = os.fdopen(os.dup(fd), "wb")
        os.dup2(sys.stderr.fileno(), fd)
    sys.stdout = sys.stderr
    return out


def main(argv=None):
    """Run the server: stdio until stdin closes, or HTTP until interrupted."""
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="kb_server: %(levelname)s: %(message)s")
    open_store(args).close()
    signer = ApprovalSigner(signing_secret(parser, args), args.approval_ttl)
    pool = StorePool(args.db, readers=args.workers, writers=max(1, args.workers // 2),
                     queued_edits=args.queued_edits)
    protocol = Protocol(pool, signer)
    try:
        if args.http:
            try:
                transport = HttpTransport(
                    protocol, args.db, args.host, args.port, allowed_origins=args.allow_origin,
                    max_body=args.max_body, request_timeout=args.request_timeout,
                    idle_timeout=args.idle_timeout, max_connections=args.max_connections,
                    authorization_server=args.authorization_server)
            except OSError as exc:
                parser.error("argument --http: cannot listen on %s: %s" % (args.http,
                                                                           exc.strerror))
            if not transport.loopback:
                log.warning("listening on %s, beyond this machine: every request needs a "
                            "token, and a TLS gateway in front is recommended", args.host)
            # The port on a line of its own, for a caller that asked for port 0.
            print("kb-server: serving http://%s:%d%s" % (args.host, transport.port, MCP_PATH),
                  file=sys.stderr, flush=True)
            try:
                transport.serve_forever()
            except KeyboardInterrupt:
                return 130
            finally:
                transport.server.server_close()
                transport.auth_pool.close()
            return 0
        grants = list(dict.fromkeys(args.grant))
        out = claim_stdout()
        log.info("serving %s for %s, writes %s", args.db, ", ".join(grants), args.writes)
        stdio = StdioTransport(protocol, Principal(args.actor, frozenset(grants), args.writes),
                               out, args.workers)
        try:
            return stdio.serve(sys.stdin.buffer)
        except KeyboardInterrupt:
            return 130
        finally:
            with contextlib.suppress(OSError):
                out.close()
    finally:
        pool.close()
