"""The SQL both engines share, one module a table (or a few that are written together).

Each class holds the statements of its tables, written once with ``?`` placeholders, each
doing one thing in the caller's transaction; ``SharedSQL`` gathers them for an engine, which
adds the primitives of ``kbcite.engines.contract``.
"""

from .articles import ArticleSQL
from .audit import AuditSQL
from .events import EventSQL
from .grants import GrantSQL
from .history import HistorySQL
from .knowledge_bases import KnowledgeBaseSQL
from .search import SearchSQL
from .proposals import ProposalSQL
from .sessions import SessionSQL
from .tokens import TokenSQL
from .vectors import VectorSQL


class SharedSQL(KnowledgeBaseSQL, ArticleSQL, HistorySQL, EventSQL, SearchSQL, TokenSQL,
                SessionSQL, AuditSQL, ProposalSQL, GrantSQL, VectorSQL):
    """Every table's statements, for an engine to stand on."""
