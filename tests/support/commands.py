"""The project's commands as subprocesses: this checkout's package, whatever is installed."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def module_argv(module, *args):
    """``python -m MODULE ARGS...`` with this interpreter."""
    return [sys.executable, "-m", module] + [str(a) for a in args]


def child_env(extra=None):
    """The environment for a child process: this checkout first on its import path."""
    env = dict(os.environ, **(extra or {}))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def git(*args):
    """``git ARGS...`` in this checkout, its output captured as text."""
    return subprocess.run(["git"] + list(args), cwd=str(ROOT), capture_output=True, text=True)
