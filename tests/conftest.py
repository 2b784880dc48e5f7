"""Shared fixtures: a store on a clock the test moves by hand."""

import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

# The modules under test live at the top of the checkout; make them importable however
# pytest is started (``pytest`` alone does not put the working directory on sys.path).
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kb_store import KBStore  # noqa: E402

# The day the simulation starts: the date the live tool list was fetched.
START = datetime(2026, 11, 8, 9, 0, 0, tzinfo=timezone.utc)


class FakeClock:
    """A store clock that stands still until the test sets or advances it."""

    def __init__(self, now=START):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, **delta):
        """Move the clock by ``timedelta(**delta)`` (negative steps it back); returns the time."""
        self.now += timedelta(**delta)
        return self.now

    def set(self, now):
        """Put the clock at ``now`` (an aware datetime); returns it."""
        self.now = now
        return now


@pytest.fixture
def clock():
    """A FakeClock at 2026-11-08T09:00:00Z that only moves when told."""
    return FakeClock()


@pytest.fixture
def store(clock):
    """An in-memory KBStore driven by ``clock``."""
    with KBStore(":memory:", clock=clock) as kb_store:
        yield kb_store


@pytest.fixture
def db_path(tmp_path):
    """Path of a not-yet-created database file in the test's temporary directory."""
    return str(tmp_path / "kb.db")


@pytest.fixture
def file_store(db_path, clock):
    """A KBStore on the file ``db_path`` (WAL mode), driven by ``clock``."""
    with KBStore(db_path, clock=clock, create=True) as kb_store:
        yield kb_store
