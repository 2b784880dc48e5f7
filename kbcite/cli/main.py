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

import importlib
import os
import sys
from typing import Optional

from ..errors import ToolError
from .messages import (
    EXIT_BROKEN_PIPE,
    EXIT_CONFLICT,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    Conflict,
    Interrupted,
    UsageError,
    person_message,
)
from .output import print_json
from .parser import COMMAND_TABLE, build_parser, parse

# Each command's module beside this one and its function (``parser.COMMAND_TABLE``): imported
# when that command runs, so ``kb --help`` and a usage error load neither the store nor the
# other commands. None: main runs it itself (upgrade opens the store its own way, completion
# needs none, the server opens it itself).
COMMANDS: dict[str, Optional[tuple[str, str]]] = {c.name: c.runs for c in COMMAND_TABLE}


def command(name):
    """The function of command ``name`` (``COMMANDS``), its module imported now."""
    entry = COMMANDS[name]
    assert entry is not None, name  # the commands main runs itself never come here
    module, function = entry
    return getattr(importlib.import_module("." + module, __package__), function)


def cmd_completion(args, out):
    """Print the shell's completion script, or --install it where the shell looks."""
    from .completing import InstallRefused, install
    from .completion import script
    text = script(build_parser(), args.shell)
    if not args.install:
        out.write(text)
        return EXIT_OK
    try:
        path, done, hint = install(args.shell, text, args.yes, os.environ)
    except InstallRefused as exc:
        print("%s: error: %s" % (PROG, exc), file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print("%s: error: cannot write the %s completion script: %s"
              % (PROG, args.shell, exc), file=sys.stderr)
        return EXIT_ERROR
    print("%s %s completion at %s; %s" % (done, args.shell, path, hint), file=out)
    return EXIT_OK


def main(argv=None):
    """The admin command line; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["__complete"]:  # the completion scripts' question at a TAB (hidden)
        from .completing import complete
        return complete(build_parser(), argv[1:], os.environ, sys.stdout)
    args = parse(argv)
    out = sys.stdout
    try:
        if args.command == "completion":
            status = cmd_completion(args, out)
        elif args.command == "serve":
            from .serve import cmd_serve
            status = cmd_serve(build_parser(), args, out)
        elif args.command == "upgrade":
            from ..store import KBStore
            old, new = KBStore.upgrade(args.db)
            if args.json:
                print_json({"store": args.db, "from_schema": old, "to_schema": new,
                            "upgraded": old != new}, out)
            else:
                print("upgraded %s from schema %d to %d" % (args.db, old, new) if old != new
                      else "%s is already at schema %d" % (args.db, new), file=out)
            status = EXIT_OK
        else:
            from ..store import KBStore
            run = command(args.command)
            with KBStore(args.db, create=args.command in ("init", "restore")) as store:
                status = run(store, args, out)
        out.flush()
    except Conflict as exc:
        print("%s: conflict: %s" % (PROG, exc), file=sys.stderr)
        return EXIT_CONFLICT
    except UsageError as exc:
        print("%s: error: %s" % (PROG, exc.message), file=sys.stderr)
        return EXIT_USAGE
    except ToolError as exc:
        print("%s: error: %s" % (PROG, person_message(exc)), file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader went away (``kb events | head``): stop quietly, and keep Python from
        # complaining again while it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Interrupted as exc:
        print("%s: %s" % (PROG, exc), file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return status or EXIT_OK
