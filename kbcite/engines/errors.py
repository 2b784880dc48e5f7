"""The errors an engine raises: busy, damaged, failed, read only, another schema; each message
says what happened to the call (nothing written) and what to do next."""

from ..errors import NotAStore, StoreBusy, StoreDamaged, StoreFailed
from ..limits import SCHEMA_VERSION


def check_version(where, version, upgrading):
    """Refuse a store of another schema, naming what to do (older: upgrade; newer: update)."""
    if version < SCHEMA_VERSION and not upgrading:
        raise NotAStore(
            "%s is a knowledge-base store of schema %d, older than this program's %d; "
            "upgrade it with: kb upgrade --db %s (copy it first to keep a backup)"
            % (where, version, SCHEMA_VERSION, where), path=str(where), schema=version)
    if version > SCHEMA_VERSION:
        raise NotAStore(
            "%s is a knowledge-base store of schema %d, newer than this program's %d; "
            "install a newer kbcite to open it" % (where, version, SCHEMA_VERSION),
            path=str(where), schema=version)


def busy_error(text, where="the knowledge-base database"):
    """store_busy: another writer held the lock past the wait; nothing was written."""
    return StoreBusy(
        "%s is busy: another writer held it past the wait (%s). Nothing was written; retry "
        "the same call (an edit resent with the same idempotency_key is applied at most once)."
        % (where, text), retryable=True)


def damaged_error(text, where="the knowledge-base database"):
    """store_damaged: the database itself is corrupt."""
    return StoreDamaged(
        "%s is damaged (%s). A retry will not help: stop writing to it, run the audit and "
        "restore it from a backup." % (where, text), retryable=False)


def failed_error(text, where="the knowledge-base database"):
    """store_failed: any other database failure (a full disk, an I/O error)."""
    return StoreFailed(
        "%s failed (%s). Each write is all or nothing, so nothing was half done: retry the same "
        "call once the cause (a full disk, say) is fixed; an edit resent with the same "
        "idempotency_key returns the stored result if it was written." % (where, text),
        retryable=True)


def read_only_error(path, reason):
    """The store_failed for a write to a store this process can only read: not retryable."""
    return StoreFailed(
        "the store %s cannot be written: %s. It is open for reading only; nothing was "
        "written. Make it writable to change it (or work on a writable copy)." % (path, reason),
        retryable=False, path=path)


def standby_error(where, text):
    """The store_failed for a write to a PostgreSQL store that refuses writes: not retryable."""
    return StoreFailed(
        "the PostgreSQL store %s is read only (%s): it is a hot standby, or the role may "
        "not write. Nothing was written; send writes to the primary (a kb-server for a "
        "standby runs with --writes deny)." % (where, text), retryable=False)


def kb_damaged_error(kb_id, what):
    """The store_damaged error for a knowledge base whose ``what`` is inconsistent."""
    return StoreDamaged(
        "the %s of knowledge base %r is damaged. A retry will not help; the store's operator "
        "must run the audit (kb audit) and restore from a backup." % (what, kb_id),
        knowledge_base_id=kb_id, retryable=False)
