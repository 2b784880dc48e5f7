"""The proposal page's link (``kb-server --public-url``): checked on the command line, carried
by the ``proposed`` result, and the approval question itself where the client opens links
(URL-mode elicitation), in both eras; without the public address nothing changes.

Over stdio with a raw client (both Pythons); the official SDK over HTTP is in
tests/test_web_browser.py, which approves the proposal on its page.
"""

import kbcite
import pytest

from kbcite.server import cli
from kbcite.server.links import check_public_url, proposal_page
from support.stdio_client import EDIT, edit_args, error_of, structured
from test_server import answer, expect_elicitation
from test_server_modern import approve, ask_for_edit, read_version, tool

PUBLIC = "https://kb.example.com/team"
URL_AND_FORM = {"elicitation": {"form": {}, "url": {}}}


@pytest.mark.parametrize("value, expected", [
    ("https://kb.example.com", "https://kb.example.com"),
    ("https://kb.example.com/", "https://kb.example.com"),
    ("http://127.0.0.1:8765", "http://127.0.0.1:8765"),
    ("https://kb.example.com/team/", "https://kb.example.com/team"),
    ("https://[::1]:8443/kb", "https://[::1]:8443/kb"),
])
def test_a_public_url_is_an_origin_with_an_optional_path(value, expected):
    assert check_public_url(value) == expected


@pytest.mark.parametrize("value", [
    "", "kb.example.com", "ftp://kb.example.com", "https://", "https:///path",
    "https://kb.example.com/?next=1", "https://kb.example.com/#top", "https://kb.example.com?",
    "https://user:pw@kb.example.com", "https://kb.example.com:99999",
    "https://kb.example.com:port", "https://kb.example.com/a b", "https://kb.example.com/\n",
    "javascript:alert(1)", "https://" + "a" * 1100 + ".com",
])
def test_anything_else_is_refused(value):
    with pytest.raises(ValueError, match="http\\(s\\)://host\\[:port\\]"):
        check_public_url(value)


def test_the_server_refuses_a_bad_public_url_in_one_line(db, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--db", str(db.path), "--grant", "support", "--public-url",
                  "ftp://kb.example.com"])
    assert exited.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("kb-server: error: argument --public-url: ") and \
        "'ftp://kb.example.com'" in last


def test_the_page_of_a_proposal_escapes_the_knowledge_base():
    assert proposal_page(PUBLIC, "support", 7) == PUBLIC + "/kb/support/review/7"
    assert proposal_page(PUBLIC, "a/b c", 1) == PUBLIC + "/kb/a%2Fb%20c/review/1"
    assert proposal_page(None, "support", 7) is None


def propose(start, db, public_url=None):
    extra = ("--public-url", public_url) if public_url else ()
    client = start(db.path, writes="review", extra=extra)
    client.initialize()
    version = structured(client.tool("read_knowledge_article", knowledge_base_id="support",
                                     article_id=db.password))["updated_at"]
    return structured(client.tool(EDIT, **edit_args(db, db.password, version, "New.", "k1")))


def test_the_proposed_result_carries_its_page(start, db):
    found = propose(start, db, PUBLIC + "/")
    assert found["status"] == "proposed"
    page = "%s/kb/support/review/%d" % (PUBLIC, found["proposal_id"])
    assert found["review_url"] == page and page in found["review"]
    assert "kb review show support %d" % found["proposal_id"] in found["review"]


def test_without_a_public_url_the_result_has_no_link(start, db):
    found = propose(start, db)
    assert found["status"] == "proposed" and "review_url" not in found
    assert "http" not in found["review"]


def pending(db):
    with kbcite.KBStore(str(db.path)) as store:
        return store.proposals.list("support", states=("pending", "rejected"))


def begin(start, db, capabilities, version="2025-11-25", public_url=PUBLIC):
    client = start(db.path, extra=("--public-url", public_url) if public_url else ())
    client.initialize(version, capabilities)
    read = structured(client.tool("read_knowledge_article", knowledge_base_id="support",
                                  article_id=db.password))["updated_at"]
    client.start_tool(EDIT, **edit_args(db, db.password, read, "New text.", "k1"))
    return client


@pytest.mark.parametrize("action", ["accept", "cancel"])
def test_a_client_that_opens_links_is_sent_to_the_page(start, db, action):
    client = begin(start, db, URL_AND_FORM)
    question = expect_elicitation(client)
    params = question["params"]
    [kept] = pending(db)
    page = "%s/kb/support/review/%d" % (PUBLIC, kept["proposal_id"])
    assert params["mode"] == "url" and params["url"] == page
    assert params["elicitationId"].startswith("kb-proposal-%d-" % kept["proposal_id"])
    assert "requestedSchema" not in params and page not in params["message"]
    assert "Resetting your password" in params["message"] and "+New text." in params["message"]
    answer(client, question, action)
    found = structured(client.recv()["result"])
    assert found["status"] == "proposed" and found["review_url"] == page
    assert found["replayed"] is True  # the proposal made for the question, not another
    [still] = pending(db)
    assert still["state"] == "pending"
    with kbcite.KBStore(str(db.path)) as store:
        assert store.get_article("support", db.password)["content"] != "New text."


def test_declining_the_link_rejects_the_proposal(start, db):
    client = begin(start, db, URL_AND_FORM)
    answer(client, expect_elicitation(client), "decline")
    error = error_of(client.recv()["result"])
    [kept] = pending(db)
    assert error["code"] == "write_not_approved" and error["details"]["reason"] == "decline"
    assert error["details"]["proposal_id"] == kept["proposal_id"]
    assert kept["state"] == "rejected" and "declined" in kept["reason"]


@pytest.mark.parametrize("capabilities, version, public_url", [
    (URL_AND_FORM, "2025-11-25", None),  # no public address: the form as before
    ({"elicitation": {}}, "2025-11-25", PUBLIC),  # form mode only
    ({"elicitation": {"form": {}, "url": {}}}, "2025-06-18", PUBLIC),  # no URL mode yet
])
def test_otherwise_the_question_is_the_form_as_before(start, db, capabilities, version,
                                                      public_url):
    client = begin(start, db, capabilities, version, public_url)
    question = expect_elicitation(client)
    assert question["params"].get("mode", "form") == "form"
    assert "requestedSchema" in question["params"] and "http" not in question["params"]["message"]
    answer(client, question, "accept")
    assert structured(client.recv()["result"])["updated_at"]
    assert pending(db) == []


# -- 2026-07-28: the input-required flow -------------------------------------------------------


def test_2026_input_required_sends_the_person_to_the_page(start, db):
    client = start(db.path, extra=("--public-url", PUBLIC))
    arguments, first = ask_for_edit(client, db, capabilities=URL_AND_FORM)
    assert first["resultType"] == "input_required"
    [kept] = pending(db)
    page = "%s/kb/support/review/%d" % (PUBLIC, kept["proposal_id"])
    params = first["inputRequests"]["approve"]["params"]
    assert first["inputRequests"]["approve"]["method"] == "elicitation/create"
    assert params["mode"] == "url" and params["url"] == page and "elicitationId" not in params
    done = structured(approve(client, arguments, first["requestState"],
                              capabilities=URL_AND_FORM))
    assert done["status"] == "proposed" and done["review_url"] == page
    assert done["proposal_id"] == kept["proposal_id"] and pending(db)[0]["state"] == "pending"


def test_2026_declining_rejects_and_a_form_client_gets_the_form(start, db):
    client = start(db.path, extra=("--public-url", PUBLIC))
    arguments, first = ask_for_edit(client, db, capabilities=URL_AND_FORM)
    error = error_of(approve(client, arguments, first["requestState"], "decline",
                             capabilities=URL_AND_FORM))
    assert error["code"] == "write_not_approved"
    assert [p["state"] for p in pending(db)] == ["rejected"]
    # The same server, a client without URL mode: the form question, no proposal.
    arguments = edit_args(db, db.password, read_version(client, db, db.password), "Other.", "k2")
    asked = tool(client, EDIT, arguments, {"elicitation": {"form": {}}})
    assert asked["inputRequests"]["approve"]["params"]["mode"] == "form"
    assert len(pending(db)) == 1
