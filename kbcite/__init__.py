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

import importlib  # noqa: E402

from .errors import (  # noqa: E402  (after the version, which the build reads alone)
    IdempotencyKeyReused,
    InternalError,
    InvalidArgument,
    NotAStore,
    NotFound,
    StoreBusy,
    StoreDamaged,
    StoreFailed,
    ToolError,
    VersionConflict,
    VersionNotFound,
    VersionPruned,
)
from .limits import (  # noqa: E402
    EVENT_PUBLISHED,
    EVENT_UNPUBLISHED,
    EVENT_UPDATED,
    SCHEMA_VERSION,
)

# The public names whose modules are imported at their first use (PEP 562), not by
# ``import kbcite``: the store and the tools bring most of the package (about 40 ms), which a
# process that only needs the errors, the constants or a command's --help does without.
LAZY = {"KBStore": ".store", "SourceDocument": ".markdown", "TOOLS": ".tools",
        "citation": ".tools", "WRITE_MODES": ".writes", "format_version": ".versions",
        "parse_version": ".versions"}


def __getattr__(name):
    module = LAZY.get(name)
    if module is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(LAZY))


__all__ = [
    "__version__",
    "KBStore", "TOOLS", "citation", "format_version", "parse_version", "SourceDocument",
    "WRITE_MODES", "SCHEMA_VERSION", "EVENT_PUBLISHED", "EVENT_UPDATED", "EVENT_UNPUBLISHED",
    "ToolError", "InvalidArgument", "NotFound", "VersionConflict", "IdempotencyKeyReused",
    "StoreBusy", "StoreFailed", "StoreDamaged", "NotAStore", "InternalError",
    "VersionNotFound", "VersionPruned",
]
