"""``python -m kbcite.sim``: the simulated day's command line, as ``kb-sim``."""

import sys

from .cli import main

# The guard keeps a worker process that re-imports this module (the spawn start method) from
# starting another day; the prog, from naming itself __main__.py.
if __name__ == "__main__":
    sys.exit(main(prog="python -m kbcite.sim"))
