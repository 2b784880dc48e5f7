"""The writes modes: what a caller's edits come to, as data.

A token, a server's ``--writes``, a team issuer's scope or a grant gives each caller one mode
a knowledge base. Every place that acts on an edit asks the mode's ``Mode`` what to do, never
compares its name: the protocol (is the edit tool offered, is a person asked, is it kept for
review), the pages (may Edit and Revert write), and the grants (which of two modes is the
broader).
"""

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Mode:
    """One writes mode and what it does to an edit."""

    name: str
    # The edit tool is offered and may be called.
    edits: bool
    # A person approves each edit as it is made (through the client, or on the proposal's page).
    asks: bool
    # Each edit waits as a proposal for a person to review.
    proposes: bool
    # The pages' Edit and Revert write for its holder (a person whose edits go through).
    writes_pages: bool
    # From narrowest to broadest: where two grants name one knowledge base, the broader wins.
    breadth: int

    @property
    def waits_for_a_person(self) -> bool:
        """Whether an edit may wait for a person (asked, or queued for review): it is served
        where it may wait, never on the event loop."""
        return self.asks or self.proposes


ALLOW = Mode("allow", edits=True, asks=False, proposes=False, writes_pages=True, breadth=3)
ASK = Mode("ask", edits=True, asks=True, proposes=False, writes_pages=False, breadth=2)
REVIEW = Mode("review", edits=True, asks=False, proposes=True, writes_pages=False, breadth=1)
DENY = Mode("deny", edits=False, asks=False, proposes=False, writes_pages=False, breadth=0)

# By name, in the order the command line lists them; ``ask`` is every default: nothing is
# written without a person's say unless someone chose otherwise.
MODES: dict[str, Mode] = {m.name: m for m in (ASK, ALLOW, DENY, REVIEW)}
WRITE_MODES: tuple[str, ...] = tuple(MODES)
DEFAULT = ASK.name


def mode(name: str) -> Mode:
    """The ``Mode`` of a mode's name; KeyError for a name that is none (names are checked
    where they come in: ``WRITE_MODES``)."""
    return MODES[name]


def broader(one: Optional[str], other: Optional[str]) -> Optional[str]:
    """The broader of two modes' names (None: no grant)."""
    if one is None:
        return other
    if other is None:
        return one
    return max(one, other, key=lambda name: MODES[name].breadth if name in MODES else -1)
