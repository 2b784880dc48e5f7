"""A person approving an edit sees the change: a bounded unified diff against the version the
agent read, in both eras, through the official SDK client, on both engines."""

import random
import sys

import pytest

import kbcite
from kbcite.linediff import CHANGED_CHARS, opcodes, unified
from kbcite.server.approval import question_text
from support.commands import ROOT
from support.stdio_client import EDIT

try:  # imported before any test captures stderr: the SDK keeps sys.stderr for its servers
    import anyio
    import mcp
    import mcp.types as types
    from mcp import Client, StdioServerParameters
except ImportError:  # Python 3.9 has no SDK
    mcp = None

# About 5 KB of a page, line by line, none of them the line appended.
PAGE = "\n".join("- Step %d: run `tool --option-%d` and read what it prints." % (n, n)
                 for n in range(90))
APPENDED = "`sudo rm -rf --no-preserve-root /`"


def rebuilt(old, new):
    """The newer text, rebuilt from the older one and the opcodes alone."""
    a, b, codes = opcodes(old, new)
    every = [line + "\n" for line in old.split("\n")][:-1] + (
        [old.rsplit("\n", 1)[-1]] if not old.endswith("\n") and old else [])
    assert a.count == len(every)
    out = []
    for tag, i1, i2, j1, j2 in codes:
        out += every[i1:i2] if tag == "equal" else b[slice(j1, j2)]
    return "".join(out)


def test_the_opcodes_rebuild_the_new_text_whatever_the_lines():
    rng = random.Random(7)
    for _ in range(2000):
        alphabet = rng.choice(["ab\n", "a\n\n", "xyz\n", "a\r\n\u2028"])
        old = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        new = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert rebuilt(old, new) == new, (old, new)


def test_a_line_appended_at_the_end_of_a_long_page_is_shown_with_its_place():
    diff = unified("tar", PAGE, "tar", PAGE + "\n" + APPENDED)
    assert len(PAGE) > 5000
    assert "+" + APPENDED in diff["text"].split("\n")
    assert "@@ -88,3 +88,4 @@" in diff["text"]  # three context lines, then the new one
    assert " - Step 89: run `tool --option-89` and read what it prints." in diff["text"]
    assert (diff["lines_added"], diff["lines_removed"], diff["hidden_lines"]) == (1, 0, 0)


def test_a_change_past_the_bound_says_what_it_did_not_show():
    added = ["new line %04d %s" % (n, "x" * 40) for n in range(400)]
    diff = unified("t", PAGE, "t", PAGE + "\n" + "\n".join(added))
    shown = [line for line in diff["text"].split("\n") if line.startswith("+new")]
    assert sum(len(line) - 1 for line in shown) >= CHANGED_CHARS - len(added[0])
    assert len(shown) + diff["hidden_lines"] == 400
    assert "{:,} more lines".format(diff["hidden_lines"]) in diff["text"]
    assert "Decline if you cannot judge" in diff["text"]


def test_controls_and_bidirectional_overrides_are_shown_as_escapes():
    diff = unified("t", "a\n", "t\u202e", "a\nevil \u202etxt.exe\x1b[2J\n")
    assert "\u202e" not in diff["text"] and "\x1b" not in diff["text"]
    assert "+evil \\u202etxt.exe\\u001b[2J" in diff["text"]
    assert "+t\\u202e" in diff["text"]  # the new title, neutralised too


def test_a_retitle_alone_shows_the_title_lines():
    diff = unified("Old name", "same\n", "New name", "same\n")
    assert diff["text"].split("\n")[:3] == ["Title:", "-Old name", "+New name"]


def test_the_question_names_the_version_the_sizes_and_the_bound():
    text = question_text({"knowledge_base_id": "kb", "article_id": "art-000001",
                          "title": "tar", "new_title": None, "current_version": "V1",
                          "current_bytes": len(PAGE), "new_bytes": len(PAGE) + 40,
                          "current_content": PAGE, "new_content": PAGE + "\n" + APPENDED})
    for needle in ("Version the agent read: V1", "1 line added, 0 lines removed",
                   "{:,} characters".format(CHANGED_CHARS), "+" + APPENDED):
        assert needle in text


# -- through the official SDK, both eras, both engines ------------------------------------------

@pytest.fixture
def page_store(tmp_path, engine, request):
    """A store (on the test's engine) with knowledge base ``kb`` holding a 5 KB page."""
    address = str(tmp_path / "kb.db") if engine == "sqlite" else \
        request.getfixturevalue("pg_url")
    with kbcite.KBStore(address, create=True) as store:
        store.create_knowledge_base("kb")
        article = store.create_article("kb", "tar", PAGE)
    return address, article


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_the_sdk_is_asked_with_the_appended_line_in_the_question(page_store, mode):
    if mcp is None:
        pytest.skip("the official MCP SDK (pip install mcp, Python >= 3.10) is not installed")

    address, article = page_store
    asked = []

    async def on_elicit(ctx, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={})

    async def main():
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "kbcite.server", "--db", address, "--grant", "kb"], cwd=str(ROOT))
        async with Client(params, mode=mode, elicitation_callback=on_elicit) as client:
            read = await client.call_tool("read_knowledge_article", {
                "knowledge_base_id": "kb", "article_id": article})
            edited = await client.call_tool(EDIT, {
                "knowledge_base_id": "kb", "article_id": article,
                "content": PAGE + "\n" + APPENDED,
                "expected_version": read.structured_content["updated_at"],
                "idempotency_key": "append-1"})
            return edited
    edited = anyio.run(main)
    assert not edited.is_error
    [message] = asked
    assert "+" + APPENDED in message.split("\n")
    assert "@@ -88,3 +88,4 @@" in message
    with kbcite.KBStore(address) as store:
        assert store.get_article("kb", article)["content"].endswith(APPENDED)
