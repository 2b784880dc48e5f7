"""``kb-server --http``: the ASGI app on uvicorn with a guarded protocol (httptools' where it is
installed, else h11's), in one process or in several.

The only module that knows uvicorn's configuration. The parent binds and listens itself, so
the serving line it prints is true the moment it appears (a port 0 included) and a client
connecting then waits in the backlog rather than being refused while the workers start; then
it serves in this process, or hands the socket to N worker processes that uvicorn's
supervisor starts (and replaces, when one dies). Each worker makes its own app from the same
``Settings``, signing secret included, so any worker finishes any approval.
"""

import dataclasses
import gc
import inspect
import logging
import socket

import uvicorn
from uvicorn.supervisors import Multiprocess

from ..inbound import SERVER_NAME, SERVER_VERSION
from ..logs import log_config
from .access_log import AccessLog
from .app import MCP_PATH, McpApp
from .h11_guard import ADDRESS_SHARE, GuardedH11Protocol

try:
    import resource
except ImportError:  # not on Windows: the descriptor limit stays as it is
    resource = None  # type: ignore[assignment]

# Connections the kernel queues before a worker accepts them: a team's agents connecting at
# once are all let in (Linux caps it at net.core.somaxconn).
BACKLOG = 2048

# On SIGTERM, requests under way get this long to finish; then they are cancelled (an open
# question ends unanswered) and the process exits.
GRACEFUL_S = 5

# Descriptors a process keeps besides its connections: store files or sockets, the log, the
# event loop's own.
RESERVED_FDS = 64

# uvicorn's log lines in ours, at WARNING (its INFO lines say what our serving line says), and
# without its "Invalid HTTP request received." (the guarded protocol logs the reason itself).
LOG_FILTERS = {"refusals": "kbcite.server.http.serve.DropRefusals"}
LOG_LEVELS = {"uvicorn": "WARNING", "uvicorn.error": "WARNING", "uvicorn.access": "WARNING"}

log = logging.getLogger(__name__)


class DropRefusals(logging.Filter):
    """Leave out uvicorn's own line for a request its parser refused; ours says why."""

    def filter(self, record):
        """Whether to keep the record."""
        return not (record.name.startswith("uvicorn")
                    and record.getMessage() == "Invalid HTTP request received.")


class AppFactory:
    """What uvicorn calls in each process to make its app: plain data, pickled to workers."""

    def __init__(self, settings):
        self.settings = settings

    def __call__(self):
        app = McpApp(self.settings)
        # What the process made to start (modules, tables, the app) lives as long as it does:
        # out of the collector's sight, a full collection under load walks only what calls made.
        gc.freeze()
        return AccessLog(app) if self.settings.access_log else app


def listen(host, port, backlog=BACKLOG):
    """A socket bound to ``host:port`` and listening, its accepted sockets without Nagle."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Linux copies it to every accepted socket (the guarded protocol sets it too).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def fit_descriptors(connections):
    """Raise this process's descriptor limit (up to its hard limit) to hold ``connections``;
    returns how many connections fit."""
    if resource is None:
        return connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < wanted:
        fit = max(1, soft - RESERVED_FDS)
        log.warning("the descriptor limit (ulimit -n %d) holds %d connections, not %d: serving "
                    "at most %d", soft, fit, connections, fit)
        return fit
    return connections


def server_log_config(log_format="plain", log_file=None):
    """The logging configuration of the server's processes, the parent's and every worker's:
    ours in ``log_format`` on stderr or appended to ``log_file``, uvicorn's at WARNING."""
    return log_config(log_format, log_file, LOG_FILTERS, LOG_LEVELS)


def protocol_class(guard):
    """The guarded protocol for ``guard.parser``: httptools' (llhttp, C) where it is installed
    and not declined, else h11's (pure Python). ImportError if httptools is asked for and
    missing."""
    if guard.parser != "h11":
        try:
            from .httptools_guard import GuardedHttpToolsProtocol
        except ImportError:
            if guard.parser == "httptools":
                raise
        else:
            return GuardedHttpToolsProtocol
    return GuardedH11Protocol


def config(settings, guard, workers=1, ssl_certfile=None, ssl_keyfile=None, logs=None):
    """uvicorn's Config for the app: the guarded protocol (``protocol_class``), our logs
    (``logs``, a ``server_log_config``; plain on stderr when None), no proxy headers trusted
    (behind a proxy, uvicorn's own --proxy-headers), a bounded graceful shutdown."""
    made = uvicorn.Config(
        AppFactory(settings), factory=True, http=protocol_class(guard), lifespan="on",
        log_config=logs or server_log_config(), access_log=False, proxy_headers=False,
        server_header=False, headers=[("server", "%s/%s" % (SERVER_NAME, SERVER_VERSION))],
        timeout_keep_alive=guard.idle_timeout, timeout_graceful_shutdown=GRACEFUL_S,
        h11_max_incomplete_event_size=guard.head_max, backlog=BACKLOG, workers=workers,
        ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile)
    made.kb_guard = guard  # type: ignore[attr-defined]  # carried to every worker
    return made


def serving_line(host, port, tls):
    """The line a caller reads the port from (it asked for port 0, say)."""
    return "kb-server: serving %s://%s:%d%s" % ("https" if tls else "http",
                                                 "[%s]" % host if ":" in host else host, port,
                                                 MCP_PATH)


def serve(settings, guard, host, port, workers=1, ssl_certfile=None, ssl_keyfile=None,
          announce=print, logs=None):
    """Listen, announce the serving line, and serve until SIGINT or SIGTERM; OSError when
    ``host:port`` cannot be listened on. Returns the exit code."""
    sock = listen(host, port)
    if settings.oauth_issuer and not settings.oauth_audience:
        # The issuer's tokens must name this resource; by default, the URL served (RFC 8707).
        settings = dataclasses.replace(settings, oauth_audience=serving_line(
            host, sock.getsockname()[1], ssl_certfile is not None).split()[-1])
    # Room for the cap and the reserve above it (h11_guard's Guard.ceiling); where the
    # descriptors hold fewer, the cap shrinks to leave the reserve its share.
    fit = fit_descriptors(guard.ceiling)
    if fit < guard.ceiling:
        guard = dataclasses.replace(guard, max_connections=max(
            1, fit * ADDRESS_SHARE // (ADDRESS_SHARE + 1)))
    made = config(settings, guard, workers, ssl_certfile, ssl_keyfile, logs)
    announce(serving_line(host, sock.getsockname()[1], ssl_certfile is not None))
    if workers == 1:
        uvicorn.Server(made).run(sockets=[sock])
        return 0
    if "target" in inspect.signature(Multiprocess).parameters:  # uvicorn before 0.40
        supervisor = Multiprocess(made, target=uvicorn.Server(made).run,  # type: ignore[call-arg]
                                  sockets=[sock])
    else:
        supervisor = Multiprocess(made, sockets=[sock])
    supervisor.run()
    return 0
