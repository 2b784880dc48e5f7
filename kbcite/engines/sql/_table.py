"""What every table's statements stand on: the engine that runs them."""

from typing import Any


class Table:
    """The statements of one table (or a few written together), as a handle on the engine
    that holds the connection (``db.articles``, ``db.history``...): each runs in the caller's
    transaction through the engine's primitives (``kbcite.engines.contract.Engine``)."""

    def __init__(self, db: Any) -> None:
        self.db = db
