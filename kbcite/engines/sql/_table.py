"""What every table's statements stand on: the engine that runs them, and what they ask of it."""

from collections.abc import Sequence
from typing import Any, Protocol


class Host(Protocol):
    """What the SQL modules need from their engine (``kbcite.engines.contract.Engine``
    keeps each): statements run in the caller's transaction, the dialect as data, and the
    few primitives a table's upkeep reaches."""

    placeholder: str
    arrays: bool
    search_doc_extra: tuple[tuple[str, str], ...]

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def rows(self, sql: str, params: Sequence[Any] = ...) -> list[dict[str, Any]]: ...

    def row(self, sql: str, params: Sequence[Any] = ...) -> Any: ...

    def value(self, sql: str, params: Sequence[Any] = ...) -> Any: ...

    def tuples(self, sql: str, params: Sequence[Any] = ...) -> list[tuple[Any, ...]]: ...

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]: ...

    def new_text_pks(self, count: int) -> list[int]: ...

    def create_kb_index(self, kb_pk: int) -> None: ...

    def index_clear(self, kb_pk: int) -> None: ...

    def _search_doc_extra(self, kb_pk: int, doc: Any) -> tuple[Any, ...]: ...


class Table:
    """The statements of one table (or a few written together), as a handle on the engine
    that holds the connection (``db.articles``, ``db.history``...): each runs in the caller's
    transaction through the engine's primitives."""

    def __init__(self, db: Host) -> None:
        self.db = db
