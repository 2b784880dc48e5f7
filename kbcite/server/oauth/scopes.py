"""What an identity may do here, from its token's scopes: ``kb:{knowledge_base_id}:{right}``.

Three rights a knowledge base: ``read`` (search, read, the event log), ``write`` (edits go as
the server's ``--oauth-writes`` mode says) and ``review`` (a person's approval of proposals).
A broader right implies the narrower (the specification asks a resource server to honour scope
hierarchies): ``write`` and ``review`` each imply ``read``.
"""

import re

from ...writes import DENY, broader

SCOPE_PREFIX = "kb:"
# The claims that may name the person in the history, in words a team's issuer uses.
SUBJECT_CLAIMS = ("sub", "email", "preferred_username")
RIGHTS = ("read", "write", "review")
# The rights each right includes.
IMPLIES = {"read": {"read"}, "write": {"read", "write"}, "review": {"read", "review"}}
# A knowledge-base ID inside a scope: what `kb init` accepts, so a scope names no other thing.
SCOPE = re.compile(r"^kb:([A-Za-z0-9._-]{1,64}):(read|write|review)$")


def scope(kb_id, right):
    """The scope that gives ``right`` on ``kb_id``."""
    return "%s%s:%s" % (SCOPE_PREFIX, kb_id, right)


def rights(scopes):
    """``{knowledge_base_id: set of rights}`` that ``scopes`` give; other scopes ignored."""
    found: dict[str, set[str]] = {}
    for word in scopes:
        match = SCOPE.match(word)
        if match:
            found.setdefault(match.group(1), set()).update(IMPLIES[match.group(2)])
    return found


def write_modes(rights_by_kb, scope_writes, store_grants):
    """``{knowledge_base_id: write mode}`` of a person: each knowledge base their scopes give
    (``rights``' answer; ``scope_writes``, the server's --oauth-writes, where they include
    ``write``, else ``deny``: read only), merged with the store's grants of them and their
    groups (``{kb: mode}``), the broader mode winning."""
    modes = {kb: scope_writes if "write" in granted else DENY.name
             for kb, granted in rights_by_kb.items()}
    for kb, mode in store_grants.items():
        modes[kb] = broader(modes.get(kb), mode)
    return modes


def scopes_supported(kb_ids):
    """The scopes RFC 9728's metadata lists for the knowledge bases served: read and write."""
    return [scope(kb_id, right) for kb_id in kb_ids for right in ("read", "write")]
