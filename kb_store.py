"""The project's original top level, kept as a thin entry point over the ``kbcite`` package.

``import kb_store`` gives the public API of ``kbcite`` (``kb_store.KBStore`` and the names in
``kbcite.__all__``); ``python kb_store.py ...`` runs the admin command line ``kb``.
"""

import sys

from kbcite import *  # noqa: F401,F403  (the public API, re-exported)
from kbcite import __all__, __version__  # noqa: F401

if __name__ == "__main__":
    from kbcite.cli import main

    sys.exit(main())
