"""kbcite: version-stamped citations for agent knowledge-base tools.

A store whose four MCP tools (search, read, compare-and-swap edit, resumable event log) hand
agents citations ``{knowledge_base_id, article_id, updated_at}`` that they can check later and
send back as the version of an edit. The public API is what ``__all__`` names; the modules
below it are the package's own rooms, documented in docs/development.md.

    from kbcite import KBStore
    with KBStore("kb.sqlite3", create=True) as store:
        store.create_knowledge_base("support")
"""

__version__ = "0.3.0"

from .errors import (  # noqa: E402  (after the version, which the build reads alone)
    IdempotencyKeyReused, InternalError, InvalidArgument, NotAStore, NotFound, StoreBusy,
    StoreDamaged, StoreFailed, ToolError, VersionConflict, VersionNotFound, VersionPruned,
)
from .limits import (  # noqa: E402
    EVENT_PUBLISHED, EVENT_UNPUBLISHED, EVENT_UPDATED, SCHEMA_VERSION,
)
from .markdown import SourceDocument  # noqa: E402
from .store import KBStore  # noqa: E402
from .tokens import WRITE_MODES  # noqa: E402
from .tools import TOOLS, citation  # noqa: E402
from .versions import format_version, parse_version  # noqa: E402

__all__ = [
    "__version__",
    "KBStore", "TOOLS", "citation", "format_version", "parse_version", "SourceDocument",
    "WRITE_MODES", "SCHEMA_VERSION", "EVENT_PUBLISHED", "EVENT_UPDATED", "EVENT_UNPUBLISHED",
    "ToolError", "InvalidArgument", "NotFound", "VersionConflict", "IdempotencyKeyReused",
    "StoreBusy", "StoreFailed", "StoreDamaged", "NotAStore", "InternalError",
    "VersionNotFound", "VersionPruned",
]
