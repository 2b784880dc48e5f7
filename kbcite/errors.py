"""The family of errors a call can end in: one class per stable ``code``.

Every failure a caller can see is a ``ToolError``; its ``message`` names the object and says
what to do next, its ``details`` carry the same facts as data. The server reports them to an
agent as tool errors, the command line to a person in its own words.
"""

from typing import Optional


class ToolError(Exception):
    """A call that could not be carried out; ``code`` is stable, ``message`` says what to do."""

    code = "error"

    def __init__(self, message, **details):
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self):
        """The error as JSON-ready data."""
        return {"code": self.code, "message": self.message, "details": dict(self.details)}


class InvalidArgument(ToolError):
    """An argument is missing, of the wrong type, or outside its limits."""

    code = "invalid_argument"


class NotFound(ToolError):
    """No such published article or granted knowledge base."""

    code = "not_found"


class VersionConflict(ToolError):
    """The article changed since the version the caller read."""

    code = "version_conflict"
    # The texts its ``changes`` are made from once the transaction is over (``articles.settle``).
    pending: Optional[tuple[str, str, str, str]] = None


class IdempotencyKeyReused(ToolError):
    """The idempotency key was already used for a different request."""

    code = "idempotency_key_reused"


class StoreBusy(ToolError):
    """Another writer held the database past the wait; nothing was written, a retry is safe."""

    code = "store_busy"


class StoreFailed(ToolError):
    """The database failed (disk full, I/O error); the transaction left nothing half done."""

    code = "store_failed"


class StoreDamaged(ToolError):
    """The stored data contradicts itself (a gap in the event log, a broken index or file)."""

    code = "store_damaged"


class NotAStore(ToolError):
    """The path or address holds no knowledge-base store, or one this version cannot read."""

    code = "not_a_store"


class InternalError(ToolError):
    """A fault in this program, not in the call; the transaction was rolled back."""

    code = "internal_error"


class VersionNotFound(ToolError):
    """The article never had that version while agents could see it."""

    code = "version_not_found"


class VersionPruned(ToolError):
    """The article had that version, but its text was pruned from the history."""

    code = "version_pruned"


class PermissionDenied(ToolError):
    """The caller may see the knowledge base but not do this to it (edit without a write
    grant); for one it may not see at all, the answer is ``not_found``."""

    code = "permission_denied"


class CallCancelled(ToolError):
    """The call was cancelled (``interrupt``) before it committed: its transaction was rolled
    back, nothing was written."""

    code = "cancelled"


class WouldWait(Exception):
    """Not an error a caller sees: a call begun with waits turned off (``Engine.waits``) met
    a lock it would have waited for, before it wrote anything; its server runs it again
    where waiting is allowed (a worker thread, not the event loop)."""
