"""The simulated support day from a checkout, nothing installed: ``python sim.py --seeds 1-5``.

The same command as ``kb-sim`` and ``python -m kbcite.sim``; the simulation is ``kbcite/sim/``.
"""

import sys

from kbcite.sim.cli import main

# The guard keeps a worker process that re-imports this script (the spawn start method) from
# starting another day.
if __name__ == "__main__":
    sys.exit(main())
