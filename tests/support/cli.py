"""The command line ``kb`` run in this process: ``kbcite.cli.main(argv)`` on standard streams of
its own and an environment given per call, as a real process would see them, and nothing of
one call left behind for the next."""

import io
import os
import sys

from kbcite.cli import main

# What the command line reads from the environment: never inherited from the test's process,
# only what a call passes (a real process is given them the same way).
COMMAND_ENVIRONMENT = ("KB_DB", "NO_COLOR")


def run_kb(argv, stdin="", env=None):
    """``(exit status, stdout, stderr)`` of ``kb ARGV`` run in this process, reading ``stdin``
    (piped: not a terminal) with ``env`` set; usage errors' ``SystemExit`` becomes a status."""
    out, err = io.StringIO(), io.StringIO()
    streams = sys.stdin, sys.stdout, sys.stderr
    environment = dict(os.environ)
    for name in COMMAND_ENVIRONMENT:
        os.environ.pop(name, None)
    os.environ.update(env or {})
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), out, err
    try:
        try:
            status = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse: usage errors, --help, --version
            status = exc.code
            if status is not None and not isinstance(status, int):  # as Python's own exit
                print(status, file=sys.stderr)
                status = 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
        os.environ.clear()
        os.environ.update(environment)
    return status or 0, out.getvalue(), err.getvalue()
