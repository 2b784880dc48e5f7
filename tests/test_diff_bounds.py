"""The change between two versions is bounded work whatever the content, and never computed
under the write lock: content built to make a diff slow (thousands of one-letter paragraphs,
up to the 1 MiB limit) is answered by check_citations and by a stale edit's conflict, exactly
(the hunks rebuild the text) or cut and flagged, on each engine; while a stale edit's
conflict is being worked out, another writer of the same store is not kept waiting."""

import random
import threading

import pytest

from kbcite import ToolError, changes
from kbcite.limits import CONTENT_MAX_BYTES
from kbcite.store import KBStore

KB = "kb-diff"
OTHER = "kb-other"
GRANTED = frozenset({KB, OTHER})
# Far past what the bounded diff takes (well under a second) and far short of what the
# unbounded one took on such content (minutes): a hang fails, a loaded machine does not.
HANG_S = 60


def call(store, name, **arguments):
    return store.call_tool(name, arguments, granted=GRANTED)


def letters(seed, size):
    """Paragraphs of one letter, ``a`` or ``b``, to about ``size`` bytes: many equal ones."""
    rng = random.Random(seed)
    return "\n\n".join(rng.choice("ab") for _ in range(size // 3))


def finishes(function):
    """``function()``'s result, or a failure if it is still running after ``HANG_S``."""
    box = []
    worker = threading.Thread(target=lambda: box.append(function()), daemon=True)
    worker.start()
    worker.join(HANG_S)
    assert box, "still computing after %d s" % HANG_S
    return box[0]


@pytest.fixture
def shared(engine, tmp_path, request):
    """An address two stores can open at once: a file for SQLite, a schema for PostgreSQL."""
    if engine == "sqlite":
        return str(tmp_path / "kb.db")
    return request.getfixturevalue("pg_url")


def two_versions(store, clock, size):
    """An article written twice with diff-hostile content; ``(article_id, old, new version)``."""
    store.create_knowledge_base(KB)
    aid = store.create_article(KB, "Letters", letters(1, size))
    old = call(store, "read_knowledge_article", knowledge_base_id=KB, article_id=aid)
    clock.advance(seconds=1)
    new = store.save_article(KB, aid, content=letters(2, size))
    return aid, old["updated_at"], new


def check_rebuilds(change, old_text, new_text):
    """An untruncated change rebuilds the newer text; a truncated one says so."""
    if not change["truncated"]:
        assert changes.apply(old_text, change) == new_text
    else:
        assert sum(len(t) for h in change["hunks"] for t in h["removed"] + h["added"]) \
            <= changes.CHANGES_MAX_CHARS


@pytest.mark.slow
@pytest.mark.parametrize("size", [6000, 24000, CONTENT_MAX_BYTES - 16])
def test_check_citations_answers_hostile_content_of_any_size(store, clock, size):
    aid, old, _ = two_versions(store, clock, size)
    cited = {"knowledge_base_id": KB, "article_id": aid, "updated_at": old}
    result = finishes(lambda: call(store, "check_citations", knowledge_base_id=KB,
                                   citations=[cited] * 100))
    assert [r["status"] for r in result["results"]] == ["changed"] * 100
    check_rebuilds(result["results"][0]["changes"], letters(1, size), letters(2, size))


def test_a_stale_edit_conflict_carries_its_change_computed_after_the_rollback(
        shared, clock, monkeypatch):
    with KBStore(shared, clock=clock, create=True) as store, \
            KBStore(shared, clock=clock, timeout=0.5) as other:
        aid, old, new = two_versions(store, clock, 24000)
        seen = []
        real = changes.changes

        def diff_while_another_writes(*args, **kwargs):
            # Another store's write of the same knowledge base: it must not wait for us.
            seen.append(other.save_article(KB, aid, title="Letters %d" % len(seen)))
            return real(*args, **kwargs)

        monkeypatch.setattr(changes, "changes", diff_while_another_writes)
        with pytest.raises(ToolError) as info:
            call(store, "edit_knowledge_article", knowledge_base_id=KB, article_id=aid,
                 content="mine", expected_version=old, idempotency_key="k1")
        assert info.value.code == "version_conflict"
        assert len(seen) == 1
        details = info.value.details
        assert details["current_version"] == new
        check_rebuilds(details["changes"], letters(1, 24000), letters(2, 24000))


def test_the_budget_bounds_the_work_and_the_answer_stays_exact():
    rng = random.Random(3)
    for _ in range(200):
        old = [rng.choice("abc") for _ in range(rng.randint(0, 60))]
        new = [rng.choice("abc") for _ in range(rng.randint(0, 60))]
        budget = changes.Budget(rng.choice([0, 10, 100, 10 ** 6]))
        change = changes.changes("t", "\n\n".join(old), "t", "\n\n".join(new),
                                 limit=10 ** 6, budget=budget)
        assert budget.steps >= -changes.SNAKE_STRIDE - 1 - len(old) - len(new)
        assert changes.apply("\n\n".join(old), change) == "\n\n".join(new)


def test_an_unbounded_budget_finds_a_shortest_change():
    rng = random.Random(4)
    for _ in range(300):
        old = [rng.choice("ab") for _ in range(rng.randint(0, 14))]
        new = [rng.choice("ab") for _ in range(rng.randint(0, 14))]
        runs = changes.hunks(old, new, changes.Budget(10 ** 9))
        # The length of a longest common subsequence, by the textbook table.
        table = [[0] * (len(new) + 1) for _ in range(len(old) + 1)]
        for i, x in enumerate(old):
            for j, y in enumerate(new):
                table[i + 1][j + 1] = table[i][j] + 1 if x == y else \
                    max(table[i][j + 1], table[i + 1][j])
        moved = sum((i2 - i1) + (j2 - j1) for i1, i2, j1, j2 in runs)
        assert moved == len(old) + len(new) - 2 * table[-1][-1]
