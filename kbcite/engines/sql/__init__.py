"""The SQL both engines share, one module a table (or a few that are written together).

Each module's class holds the statements of its tables, written once with ``?`` placeholders,
each doing one thing in the caller's transaction. An engine holds one of each as a handle
(``open_tables``): ``db.articles.swap(...)``, ``db.history.of(...)``, ``db.events.after(...)``,
so that the engine's own surface is its contract (``kbcite.engines.contract``) and a table's
statements are found under its name. An engine that says a statement its own way gives its
own class for that table.
"""

from typing import cast

from ._table import Host, Table
from .articles import ArticleSQL
from .audit import AuditSQL
from .events import EventSQL
from .grants import GrantSQL
from .history import HistorySQL
from .knowledge_bases import KnowledgeBaseSQL
from .proposals import ProposalSQL
from .search import SearchSQL
from .sessions import SessionSQL
from .tokens import TokenSQL
from .vectors import VectorSQL

# Each handle's name on an engine, and the class of its statements.
TABLES = {"kbs": KnowledgeBaseSQL, "articles": ArticleSQL, "history": HistorySQL,
          "events": EventSQL, "search": SearchSQL, "tokens": TokenSQL, "sessions": SessionSQL,
          "audit": AuditSQL, "proposals": ProposalSQL, "grants": GrantSQL,
          "vectors": VectorSQL}


class TableHandles:
    """The tables' handles an engine holds, made once for its connection; an engine names
    its own class for a table in ``table_classes``."""

    table_classes = TABLES

    kbs: KnowledgeBaseSQL
    articles: ArticleSQL
    history: HistorySQL
    events: EventSQL
    search: SearchSQL
    tokens: TokenSQL
    sessions: SessionSQL
    audit: AuditSQL
    proposals: ProposalSQL
    grants: GrantSQL
    vectors: VectorSQL

    def open_tables(self) -> None:
        """Make one handle a table, each holding this engine."""
        for name, cls in self.table_classes.items():
            setattr(self, name, cls(cast(Host, self)))


__all__ = ["TABLES", "Table", "TableHandles"]
