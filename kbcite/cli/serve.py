"""``kb serve``: the HTTP server (``kb-server --http``) with its settings from a config file,
the environment and the command line, in that order of strength, lowest first.

    kb serve                      # ./kb.toml (or [tool.kbcite] in ./pyproject.toml)
    kb serve --config /etc/kbcite/kb.toml --port 9000
    kb serve --check              # the settings it would serve with, and where each came from

The settings and their checks are ``kbcite.server.config``'s; serving is ``kb-server``'s own
``run``, so the two commands serve alike.
"""

import argparse
import os
import sys

from ..server import config as settings
from ..server.options import add_http_options
from ..writes import DEFAULT as DEFAULT_WRITES
from .messages import EXIT_ERROR, EXIT_OK, PROG

DESCRIPTION = (
    "Serve the store over Streamable HTTP (http://HOST:PORT/mcp and the web pages), as "
    "kb-server --http does, with its settings from a config file. Each setting comes from, "
    "strongest first: its flag; its environment variable (KB_ and the key in capitals, - as _: "
    "KB_PORT, KB_DB, KB_MAX_BODY); the config file (--config FILE, else kb.toml in the current "
    "folder, else the [tool.kbcite] table of its pyproject.toml); the default. The file's keys "
    "are the flags' names without the dashes (db, host, port, workers, max-body, log-format, "
    "...); repeatable flags are arrays (allow-origins, oauth-scopes); a relative path is taken "
    "from the file's folder. Secrets stay in the environment: KB_SIGNING_SECRET (or "
    "signing-secret-file) and KB_OAUTH_CLIENT_SECRET.")


def add_parser(sub, common):
    """``kb serve`` on the command line's subcommands."""
    p = sub.add_parser("serve", parents=[common], help="serve the store over HTTP with the "
                       "settings of kb.toml (kb-server --http with a config file)",
                       description=DESCRIPTION)
    p.add_argument("--config", metavar="FILE",
                   help="the config file (default: ./kb.toml, else [tool.kbcite] in "
                        "./pyproject.toml, else none)")
    p.add_argument("--check", action="store_true",
                   help="print the settings it would serve with and where each came from, "
                        "then exit (0 if they can be served)")
    p.add_argument("--host", default=argparse.SUPPRESS,
                   help="the address to listen on (default %s; 0.0.0.0 or :: for every "
                        "interface)" % settings.HOST)
    p.add_argument("--port", type=int, default=argparse.SUPPRESS,
                   help="the port (default %d; 0 picks a free one)" % settings.PORT)
    add_http_options(p, defaults=False)
    return p


def resolve(args, environ, folder):
    """``(values, sources, config file or None)``: every setting, strongest source first,
    and ``{dest: where it came from}``; ConfigError for a file or variable that cannot be
    used."""
    path = args.config
    if path is not None and not os.path.isfile(path):
        raise settings.ConfigError("%s: no such file (--config names kb serve's TOML file)"
                                   % path)
    if path is None:
        path = settings.find(folder)
    values = settings.defaults()
    sources = dict.fromkeys(values, "default")
    layers = [("file", settings.read(path)[1] if path else {}),
              ("environment", settings.from_environment(environ)),
              ("flag", {dest: getattr(args, dest) for dest in values
                        if dest != "db" and hasattr(args, dest)})]
    if args.db_flag:
        layers[-1][1]["db"] = args.db_flag
    table = settings.keys()
    for name in ("host", "port"):  # kb-server's own checks would name its --http
        if hasattr(args, name):
            try:
                table[name].check(getattr(args, name))
            except ValueError as exc:
                raise settings.ConfigError("argument --%s: must be %s, got %r"
                                           % (name, exc, getattr(args, name))) from None
    for source, layer in layers:
        values.update(layer)
        sources.update(dict.fromkeys(layer, source))
    return values, sources, path


def server_args(values):
    """The ``kb-server --http`` arguments of ``values``."""
    host = values["host"]
    args = argparse.Namespace(**values)
    args.http = "%s:%d" % ("[%s]" % host if ":" in host else host, values["port"])
    args.grant, args.writes, args.actor = None, DEFAULT_WRITES, "kb-server"
    return args


def check_report(values, sources, path):
    """The lines of ``kb serve --check``: each setting, its value and its source."""
    lines = ["config file: %s" % (path or "none (no kb.toml or [tool.kbcite] here)")]
    for key in sorted(settings.keys().values(), key=lambda k: k.name):
        value = values.get(key.dest)
        if isinstance(value, list):
            value = ", ".join(value) or "-"
        lines.append("%-24s %-32s %s" % (key.name, "-" if value is None else value,
                                         sources[key.dest]))
    return lines


def cmd_serve(parser, args, out):
    """Serve until interrupted (or, with --check, print the settings); the exit status."""
    from ..server import cli as server
    try:
        values, sources, path = resolve(args, os.environ, os.curdir)
    except settings.ConfigError as exc:
        print("%s serve: error: %s" % (PROG, exc), file=sys.stderr)
        return EXIT_ERROR
    if not values["db"]:
        print("%s serve: error: no store given: --db PATH, $KB_DB, or db = \"PATH\" in %s"
              % (PROG, settings.CONFIG_FILE), file=sys.stderr)
        return EXIT_ERROR
    serve_parser = next(action.choices["serve"] for action in parser._actions
                        if isinstance(action, argparse._SubParsersAction))
    check, args = args.check, server_args(values)
    server.PROG[0] = "%s serve" % PROG
    if check:
        server.check_args(serve_parser, args)
        server.open_store(args).close()
        print("\n".join(check_report(values, sources, path)), file=out)
        return EXIT_OK
    return server.run(serve_parser, args)
