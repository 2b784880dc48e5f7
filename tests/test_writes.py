"""The writes modes as data: what each does to an edit, and which of two is the broader."""

import pytest

from kbcite import writes


def test_each_mode_says_what_becomes_of_an_edit():
    done = {name: (m.edits, m.asks, m.proposes, m.writes_pages, m.waits_for_a_person)
            for name, m in writes.MODES.items()}
    assert done == {"allow": (True, False, False, True, False),
                    "ask": (True, True, False, False, True),
                    "review": (True, False, True, False, True),
                    "deny": (False, False, False, False, False)}
    assert writes.WRITE_MODES == ("ask", "allow", "deny", "review") and writes.DEFAULT == "ask"


@pytest.mark.parametrize("one,other,wider", [
    ("deny", "review", "review"), ("review", "ask", "ask"), ("ask", "allow", "allow"),
    ("allow", "deny", "allow"), (None, "deny", "deny"), ("ask", None, "ask"), (None, None, None)])
def test_the_broader_of_two_modes_wins(one, other, wider):
    assert writes.broader(one, other) == wider
    assert writes.broader(other, one) == wider
