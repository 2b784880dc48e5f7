"""The kb-server command line: parse the arguments, open the store, run one transport.

    kb-server --db PATH --grant KB [--grant KB ...] [--writes ask|allow|deny|review]  # stdio
    kb-server --db PATH --http 127.0.0.1:8765 [--workers N]                      # HTTP, /mcp

stdio needs the standard library alone; the HTTP modules (uvicorn, the ``[http]`` extra) are
imported only for ``--http``. stdout carries protocol messages only (stdio); everything else,
logs included, goes to stderr.
"""

import argparse
import contextlib
import difflib
import importlib.util
import io
import logging
import os
import secrets
import sys

from .. import __version__
from ..errors import ToolError
from ..limits import ACTOR_MAX, SCHEMA_VERSION
from ..store import KBStore
from ..writes import DEFAULT as DEFAULT_WRITES
from ..writes import WRITE_MODES
from .calls import Principal
from .dispatch import Dispatch
from .inbound import SERVER_NAME
from .links import check_public_url
from .logs import check_log_file, log_config
from .options import (  # noqa: F401 (HTTP_DEFAULTS: kb-server's own)
    HTTP_DEFAULTS,
    MINIMUM,
    ORIGIN_FORM,
    POSITIVE,
    add_http_options,
    is_origin,
)
from .pool import StorePool
from .stdio import StdioTransport

MISSING_HTTP = ("kb-server: error: argument --http: serving HTTP needs uvicorn, which is not "
                "installed: pip install 'kbcite[http]'")

log = logging.getLogger(__name__)


# The name the one-line errors start with: kb-server's, or kb serve's when it runs the server.
PROG = ["kb-server"]


def fail(message):
    """Exit with one line naming what went wrong: a runtime error, so no usage."""
    sys.exit("%s: error: %s" % (PROG[0], message))


def build_parser():
    """The command line: a store, the transport, and who may do what."""
    parser = argparse.ArgumentParser(
        prog="kb-server",
        description="MCP server for a knowledge-base store: stdio (one client, --grant) or "
                    "Streamable HTTP (--http, bearer tokens from kb token create).",
    )
    parser.add_argument("--version", action="version",
                        version="kb-server %s (store schema %d)" % (__version__, SCHEMA_VERSION))
    parser.add_argument("--db", metavar="PATH", default=os.environ.get("KB_DB") or None,
                        required=not os.environ.get("KB_DB"),
                        help="an existing store, made by: kb init --db PATH KB; a file or a "
                             "postgresql:// URL (default: $KB_DB)")
    parser.add_argument("--grant", action="append", metavar="KB",
                        help="stdio: a knowledge base the agent may use; repeat for several "
                             "(over HTTP, each token carries its own grants)")
    parser.add_argument("--writes", choices=WRITE_MODES, default=DEFAULT_WRITES,
                        help="stdio: ask: a person approves every edit through the client "
                             "(default; a client that cannot ask gets review); allow: edit "
                             "without asking; deny: read only; review: each edit is kept as a "
                             "proposal for kb review (over HTTP, each token carries its own)")
    parser.add_argument("--actor", default=SERVER_NAME, metavar="NAME",
                        help="stdio: who the history says made this agent's edits (default "
                             "%%(default)s; over HTTP, each token's name)")
    parser.add_argument("--http", metavar="HOST:PORT",
                        help="serve Streamable HTTP on http://HOST:PORT/mcp instead of stdio "
                             "(needs pip install 'kbcite[http]'); bind to 127.0.0.1 unless "
                             "other machines must reach it")
    add_http_options(parser)
    return parser


def check_args(parser, args):
    """Refuse a command line that cannot work, naming the argument."""
    if args.db == "":
        parser.error("argument --db: an empty name: name the store (a file or a postgresql:// "
                     "URL)")
    if not args.actor.strip() or len(args.actor) > ACTOR_MAX:
        parser.error("argument --actor: a name of 1 to %d characters, got %r"
                     % (ACTOR_MAX, args.actor[:ACTOR_MAX + 1]))
    for name, low in MINIMUM.items():
        if getattr(args, name) < low:
            parser.error("argument --%s: must be %s" % (name.replace("_", "-"),
                                                        "0 or more" if low == 0 else
                                                        "at least %d" % low))
    for name in POSITIVE:
        if getattr(args, name) <= 0:
            parser.error("argument --%s: must be positive" % name.replace("_", "-"))
    for origin in args.allow_origin:
        if not is_origin(origin):
            parser.error("argument --allow-origin: %s, got %r" % (ORIGIN_FORM, origin))
    if args.log_file:
        problem = check_log_file(args.log_file)
        if problem:
            fail("argument --log-file: %s" % problem)
    if args.public_url is not None:
        try:
            args.public_url = check_public_url(args.public_url)
        except ValueError as exc:
            parser.error("argument --public-url: %s" % exc)
    if args.http:
        if args.grant:
            parser.error("argument --grant: over HTTP each token carries its grants (kb token "
                         "create NAME --grant KB); drop --grant")
        host, _, port = args.http.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            parser.error("argument --http: expected HOST:PORT such as 127.0.0.1:8765, got %r"
                         % args.http)
        args.host, args.port = host.strip("[]"), int(port)
        if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
            parser.error("argument --ssl-certfile: https needs both --ssl-certfile and "
                         "--ssl-keyfile")
        for name in ("ssl_certfile", "ssl_keyfile"):
            path = getattr(args, name)
            if path and not os.access(path, os.R_OK):
                fail("argument --%s: cannot read %s" % (name.replace("_", "-"), path))
        return
    if args.workers != 1:
        parser.error("argument --workers: stdio serves its one client in one process; "
                     "--threads sets how many calls run at once")
    if not args.grant:
        parser.error("argument --grant: required for stdio (the knowledge bases the agent may "
                     "use)")
    for kb_id in args.grant:
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
        fail("argument --db: %s" % exc.message)
    try:
        missing = [kb_id for kb_id in args.grant or () if not store.knowledge_base_exists(kb_id)]
    except ToolError as exc:
        store.close()
        fail("argument --db: %s" % exc.message)
    if missing:
        known = [row["knowledge_base_id"] for row in store.list_knowledge_bases()]
        store.close()
        near = [match for kb_id in missing
                for match in difflib.get_close_matches(kb_id, known, n=1)]
        fail("argument --grant: no knowledge base %s in %s%s"
             % (", ".join(repr(kb_id) for kb_id in missing), args.db,
                "; did you mean %s?" % ", ".join(near) if near else
                " (kb knowledge-bases --db %s lists them)" % args.db))
    return store


def signing_secret(args):
    """The approval handles' secret: a file, $KB_SIGNING_SECRET, or random for this server
    (all of its worker processes)."""
    if args.signing_secret_file:
        try:
            with open(args.signing_secret_file, "rb") as fh:
                secret = fh.read().strip()
        except OSError as exc:
            fail("argument --signing-secret-file: cannot read %s: %s"
                 % (args.signing_secret_file, exc.strerror))
        if len(secret) < 16:
            fail("argument --signing-secret-file: at least 16 bytes of secret, got %d"
                 % len(secret))
        return secret
    if os.environ.get("KB_SIGNING_SECRET"):
        return os.environ["KB_SIGNING_SECRET"].encode("utf-8")
    log.info("no signing secret given: 2026-07-28 approvals can be finished by this server "
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


def oauth_settings(args):
    """The Settings of ``--oauth-*``, the issuer reached once now: a wrong one is one line at
    start (not a refusal of every request later)."""
    if not args.oauth_issuer:
        return {}
    try:
        from .oauth import bearer  # noqa: F401 (joserfc, checked before serving)
        from .oauth.issuer import Issuer, IssuerError
    except ImportError as exc:
        fail("argument --oauth-issuer: needs the [oauth] extra (%s is missing): pip install "
             "'kbcite[oauth]'" % (exc.name or "joserfc"))
    try:
        Issuer(args.oauth_issuer).start()
    except IssuerError as exc:
        fail("argument --oauth-issuer: %s" % exc)
    secret = os.environ.get("KB_OAUTH_CLIENT_SECRET")
    if args.oauth_client_id and not secret:
        fail("argument --oauth-client-id: set $KB_OAUTH_CLIENT_SECRET to its secret too")
    return {"oauth_issuer": args.oauth_issuer.rstrip("/"), "oauth_audience": args.oauth_audience,
            "oauth_subject_claim": args.oauth_subject_claim, "oauth_writes": args.oauth_writes,
            "oauth_scopes": tuple(args.oauth_scope), "oauth_client_id": args.oauth_client_id,
            "oauth_client_secret": secret if args.oauth_client_id else None}


def serve_http(args, secret, oauth):
    """Serve Streamable HTTP until SIGINT or SIGTERM; returns the exit code."""
    try:
        from .http.h11_guard import Guard
        from .http.request_checks import is_loopback
        from .http.serve import serve, server_log_config
        from .http.settings import Settings
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in ("uvicorn", "h11"):
            sys.exit(MISSING_HTTP)
        raise
    settings = Settings(
        db=args.db, signing_secret=secret, allowed_origins=tuple(args.allow_origin),
        host=args.host, max_body=args.max_body, threads=args.threads,
        queued_edits=args.queued_edits, approval_ttl=args.approval_ttl,
        authorization_server=args.authorization_server, session_timeout=args.session_timeout,
        sessions_per_token=args.sessions_per_token, keepalive=args.keepalive,
        web_session_timeout=args.web_session_timeout,
        web_sessions_per_token=args.web_sessions_per_token,
        subscriptions_per_token=args.subscriptions_per_token, public_url=args.public_url,
        access_log=args.log_format == "json", web_process=True, **oauth)
    guard = Guard(request_timeout=args.request_timeout, idle_timeout=args.idle_timeout,
                  max_connections=args.max_connections, parser=args.http_parser)
    if args.http_parser == "httptools" and importlib.util.find_spec("httptools") is None:
        sys.exit("kb-server: error: argument --http-parser: httptools is not installed: "
                 "pip install 'kbcite[http]', or --http-parser h11")
    if not is_loopback(args.host):
        log.warning("listening on %s, beyond this machine: every request needs a token, and "
                    "TLS (--ssl-certfile, or a gateway in front) is recommended", args.host)
    try:
        # The port on a line of its own, for a caller that asked for port 0.
        return serve(settings, guard, args.host, args.port, args.workers, args.ssl_certfile,
                     args.ssl_keyfile,
                     announce=lambda line: print(line, file=sys.stderr, flush=True),
                     logs=server_log_config(args.log_format, args.log_file))
    except OSError as exc:
        fail("argument --http: cannot listen on %s: %s" % (args.http, exc.strerror or exc))


def main(argv=None):
    """Run the server: stdio until stdin closes, or HTTP until interrupted."""
    PROG[0] = "kb-server"
    parser = build_parser()
    return run(parser, parser.parse_args(argv))


def run(parser, args):
    """Run the server of parsed ``args``; ``parser`` says what a usage error is (kb-server's
    own, or kb serve's)."""
    check_args(parser, args)
    import logging.config  # only here: 7 ms that --help and a refused argument do without
    logging.config.dictConfig(log_config(args.log_format, args.log_file))
    open_store(args).close()
    # The issuer is reached before anything is logged: a wrong one is the only line.
    oauth = oauth_settings(args) if args.http else {}
    secret = signing_secret(args)
    if args.http:
        return serve_http(args, secret, oauth)
    pool = StorePool(args.db, readers=args.threads, writers=max(1, args.threads // 2),
                     queued_edits=args.queued_edits)
    dispatch = Dispatch(pool, secret, args.approval_ttl, args.public_url)
    grants = list(dict.fromkeys(args.grant))
    out = claim_stdout()
    log.info("serving %s for %s, writes %s", args.db, ", ".join(grants), args.writes)
    stdio = StdioTransport(dispatch, Principal(args.actor, frozenset(grants), args.writes), out,
                           args.threads)
    try:
        return stdio.serve(sys.stdin.buffer)
    except KeyboardInterrupt:
        return 130
    finally:
        with contextlib.suppress(OSError):
            out.close()
        pool.close()
