"""What a team issuer's people and groups may do, kept in the store (``store.grants``).

An identity provider that cannot mint ``kb:{kb}:{right}`` scopes (or a team that would rather
keep access beside the data) says it here: ``kb grant add --subject alice@example.com --kb
support --writes ask`` or ``--group editors``. A signed-in person gets the knowledge bases of
their scopes and of these rows together; where both name a knowledge base, the broader write
mode wins, and a subject's own row wins over a group's.
"""

from typing import Optional

from . import access
from .errors import InvalidArgument, NotFound
from .validation import check_people_string, shown
from .versions import format_version
from .writes import DEFAULT as DEFAULT_WRITES
from .writes import WRITE_MODES, broader

KINDS = ("subject", "group")
# A subject or group name as issuers spell them (an email, a UUID, a group path).
NAME_MAX = 256


def _checked(kind, name, writes=None):
    """Refuse a kind, name or write mode that cannot be, naming the argument."""
    if kind not in KINDS:
        raise InvalidArgument("kind must be one of %s, got %s" % (", ".join(KINDS), shown(kind)),
                              argument="kind")
    check_people_string(name, kind, NAME_MAX)
    if writes is not None and writes not in WRITE_MODES:
        raise InvalidArgument("writes must be one of %s, got %s"
                              % (", ".join(WRITE_MODES), shown(writes)), argument="writes")


class Grants:
    """The store's grants of people and groups; each call one transaction."""

    def __init__(self, ctx):
        self._ctx = ctx

    def add(self, kind, name, kb_id, writes=DEFAULT_WRITES):
        """Grant ``kind`` ``name`` knowledge base ``kb_id`` with ``writes`` (``deny``: read
        only); an existing grant takes the new mode."""
        _checked(kind, name, writes)
        db = self._ctx.db
        with db.write():
            kb = access.knowledge_base(db, kb_id)
            db.grants.put(kind, name, kb["pk"], writes, format_version(self._ctx.now_us()))

    def remove(self, kind, name, kb_id):
        """Take a grant back; NotFound when there is none."""
        _checked(kind, name)
        db = self._ctx.db
        with db.write():
            kb = access.knowledge_base(db, kb_id)
            if not db.grants.delete(kind, name, kb["pk"]):
                raise NotFound("%s %r has no grant of knowledge base %r (kb grant list shows "
                               "them)" % (kind, name, kb_id), grant=name)

    def list(self):
        """Every grant: kind, name, knowledge base, write mode, when it was made."""
        db = self._ctx.db
        with db.read():
            return [dict(row) for row in db.grants.list()]

    def of(self, subject, groups=()):
        """``{kb_id: writes}`` for a signed-in subject and its groups: a subject's own row
        wins over its groups', the broadest of its groups' otherwise."""
        db = self._ctx.db
        with db.read():
            rows = db.grants.of(subject, sorted(set(groups)))
        own: dict[str, str] = {}
        grouped: dict[str, Optional[str]] = {}
        for row in rows:
            kb_id, mode = row["knowledge_base_id"], row["writes"]
            if row["kind"] == "subject":
                own[kb_id] = mode
            else:
                grouped[kb_id] = broader(grouped.get(kb_id), mode)
        return dict(grouped, **own)
