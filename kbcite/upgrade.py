"""An older store brought up to this schema: ``kb upgrade`` and ``KBStore.upgrade``."""

from .engines import open_engine
from .limits import SCHEMA_VERSION, VECTORS_SCHEMA
from .search import index
from .search.semantic import Semantic


def upgrade(address, semantic=None):
    """Bring an older store up to this schema in one transaction, re-indexing what the
    new schema indexes differently (and, where the semantic half is on, embedding the
    articles of a store that had no vectors); returns ``(old schema, new schema)``."""
    db = open_engine(address, upgrading=True)
    halves = Semantic.opened(semantic, address)
    try:
        # A migration may rebuild a table that others refer to; the upgrade checks the
        # references itself before it commits.
        db.foreign_keys(False)
        with db.write():
            found, kb_pks = db.upgrade_schema()
            for kb_pk in kb_pks:
                index.index_all(db, db.kbs.by_pk(kb_pk))
            if found < VECTORS_SCHEMA and halves.on:
                for kb in db.audit.kbs():
                    halves.embed_all(db, kb)
        db.foreign_keys(True)
    finally:
        db.close()
    return found, SCHEMA_VERSION
