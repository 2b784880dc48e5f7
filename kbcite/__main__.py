"""``python -m kbcite``: the admin command line, ``kb``."""

import sys

from .cli import main

sys.exit(main())
