"""The semantic half: the bundled model loaded with no network, vectors kept with the versions
they embed on both engines, hybrid search fused under exact-title-first, and lexical search,
exactly, wherever the half is off or missing."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

import kbcite
from kbcite import KBStore
from kbcite.search import embedding
from kbcite.search.semantic import Semantic, fuse
from kbcite.tools import SEARCH_HYBRID, SEARCH_LEXICAL, tools_listed
from support.commands import ROOT

KB = "ops"

HAS_MODEL = importlib.util.find_spec("wordllama") is not None
needs_model = pytest.mark.skipif(not HAS_MODEL, reason='the [semantic] extra is not installed '
                                 '(pip install -e ".[test]" installs it)')

# Command pages, the way a cheat-sheet folder has them: a command's name, what it does.
PAGES = [
    ("ls", "List directory contents."),
    ("du", "Estimate and summarize file space usage of a folder and its children."),
    ("tar", "Archiving utility, often combined with a compression method such as gzip."),
    ("kill", "Send a signal to a process, usually to stop it."),
    ("sourdough", "How to bake bread at home with flour, water, salt and a starter."),
]


def search(store, query, kb=KB, **args):
    return store.call_tool("search_knowledge_base", dict(knowledge_base_id=kb, query=query,
                                                         **args), granted=[kb])["results"]


def vectors(store):
    return store._db.value("SELECT count(*) FROM article_vectors")


@pytest.fixture
def hybrid(address, clock):
    """A store on each engine with the semantic half on, and the command pages."""
    with KBStore(address, clock=clock, create=True, semantic=True) as store:
        store.create_knowledge_base(KB)
        store.ids = store.create_articles(KB, PAGES)
        yield store


@needs_model
def test_the_bundled_model_embeds_as_wordllama_itself_does():
    from tokenizers import Tokenizer
    from wordllama import WordLlamaInference
    import numpy as np
    root = embedding.package_root()
    ours, why = embedding.model()
    assert why is None
    theirs = WordLlamaInference(ours._weights, Tokenizer.from_file(
        str(root / embedding.TOKENIZER_FILE)))
    texts = ["List directory contents.", "How to bake bread at home", "kill -9 a process",
             "Ünïcode wörds and 漢字 too"]
    expected = theirs.embed(texts, norm=True)
    assert np.allclose(ours.embed(texts), expected, atol=1e-5)
    assert embedding.DIMENSIONS == expected.shape[1] == 256


@needs_model
def test_the_model_loads_and_embeds_with_no_network_at_all(tmp_path):
    # A fresh process whose sockets all refuse, with an empty home (no cache of any model)
    # and the hubs' own offline switches: the model still loads and embeds.
    script = textwrap.dedent("""
        import socket, sys
        def refuse(*args, **kwargs):
            raise OSError("no network in this test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        sys.path.insert(0, %r)
        from kbcite.search import embedding
        model, why = embedding.model()
        assert why is None, why
        vector = model.embed(["show disk usage"])[0]
        print(len(vector), round(float((vector * vector).sum()), 3))
    """ % str(ROOT))
    env = dict(os.environ, HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["256", "1.0"]
    assert not list(tmp_path.rglob("*.safetensors")) and not list(tmp_path.rglob("*.json"))


def test_a_missing_extra_is_one_reason_naming_it(monkeypatch):
    monkeypatch.setattr(embedding, "package_root", lambda: None)
    model, why = embedding._load()
    assert model is None and embedding.EXTRA in why
    assert embedding.status_line(None, why) == "search: lexical only: " + why


def test_a_damaged_model_is_one_reason_and_search_goes_on_lexical(tmp_path, clock):
    # A wordllama package whose files are missing: the store says why once and stays lexical.
    fake = tmp_path / "site" / "wordllama"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    script = textwrap.dedent("""
        import logging, sys
        logging.basicConfig(level=logging.INFO, format="%%(message)s")
        sys.path[:0] = [%r, %r]
        from kbcite import KBStore
        store = KBStore(":memory:", semantic=True)
        store.create_knowledge_base("kb")
        store.create_articles("kb", [("ls", "List directory contents.")])
        hits = store.call_tool("search_knowledge_base", {"knowledge_base_id": "kb",
                               "query": "list directory contents"}, granted=["kb"])["results"]
        print([(h["title"], h["match"]) for h in hits])
    """ % (str(tmp_path / "site"), str(ROOT)))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('ls', 'lexical')]"
    said = [line for line in done.stderr.splitlines() if line.startswith("search:")]
    # The files are looked for before anything loads, and named.
    assert len(said) == 1 and "files are missing" in said[0] and embedding.EXTRA in said[0]
    assert str(embedding.WEIGHTS_FILE) in said[0]


@needs_model
def test_every_published_version_has_its_vector_in_its_own_transaction(hybrid):
    assert vectors(hybrid) == len(PAGES)
    draft = hybrid.create_article(KB, "rsync", "Copy files to a remote host.", published=False)
    assert vectors(hybrid) == len(PAGES)  # drafts have none
    hybrid.publish(KB, draft)
    assert vectors(hybrid) == len(PAGES) + 1
    hybrid.unpublish(KB, hybrid.ids[0])
    hybrid.delete_article(KB, hybrid.ids[1])
    assert vectors(hybrid) == len(PAGES) - 1
    assert hybrid.audit() == []
    # A write that fails rolls its vector back with everything else.
    before = hybrid._db.dump()
    with pytest.raises(kbcite.VersionConflict):
        hybrid.call_tool("edit_knowledge_article", {
            "knowledge_base_id": KB, "article_id": hybrid.ids[4], "content": "gardening",
            "expected_version": "2000-01-01T00:00:00.000000Z", "idempotency_key": "k1"},
            granted=[KB])
    assert hybrid._db.dump() == before


@needs_model
def test_a_paraphrase_is_found_by_its_meaning(hybrid):
    hits = search(hybrid, "terminate a program")
    assert hits[0]["title"] == "kill" and hits[0]["match"] == "semantic"
    hits = search(hybrid, "compress files")
    assert hits[0]["title"] == "tar"
    # An edit's new text is what is found: its old meaning is gone with its old vector.
    hybrid.save_article(KB, hybrid.ids[3], content="Tips for growing tomatoes in a garden.")
    assert "kill" not in [h["title"] for h in search(hybrid, "terminate a program")]


@needs_model
@needs_model
def test_the_audit_names_a_vector_of_an_article_not_published(hybrid):
    with hybrid._db.write():  # a damaged store: the vector of a withdrawn article left behind
        hybrid._db.execute("UPDATE articles SET published = 0 WHERE article_id = ?",
                           (hybrid.ids[0],))
    assert any("vector(s) of articles not published" in p for p in hybrid.audit())


def test_an_exact_title_stays_first_and_each_hit_says_what_found_it(hybrid):
    hybrid.create_article(KB, "list", "Print the items of a list, one a line.")
    hits = search(hybrid, "ls")
    assert hits[0]["title"] == "ls" and hits[0]["match"] == "both"
    assert {h["match"] for h in search(hybrid, "directory contents list")} <= {
        "lexical", "semantic", "both"}
    assert search(hybrid, "list")[0]["title"] == "list"


@needs_model
def test_drafts_other_knowledge_bases_and_unpublished_articles_are_never_scored(hybrid):
    hybrid.create_article(KB, "breadmaking", "Bake bread: knead dough, let it rise, bake.",
                          published=False)
    hybrid.create_knowledge_base("kitchen")
    hybrid.create_articles("kitchen", [("bread", "Bake a loaf of bread in the oven.")])
    hybrid.unpublish(KB, hybrid.ids[4])
    found = [h["title"] for h in search(hybrid, "bake a loaf of bread")]
    assert "breadmaking" not in found and "bread" not in found and "sourdough" not in found
    assert search(hybrid, "bake a loaf of bread", kb="kitchen")[0]["title"] == "bread"


def test_without_the_half_the_ranking_is_exactly_the_lexical_one(address, clock):
    with KBStore(address, clock=clock, create=True, semantic=False) as store:
        store.create_knowledge_base(KB)
        store.create_articles(KB, PAGES)
        assert vectors(store) == 0
        hits = search(store, "list directory contents")
        assert [h["title"] for h in hits] == ["ls"] and hits[0]["match"] == "lexical"
        assert search(store, "terminate a program") == []


@needs_model
def test_a_write_without_the_half_removes_the_vector_it_would_make_stale(engine, tmp_path,
                                                                         request, clock):
    address = (str(tmp_path / "kb.db") if engine == "sqlite"
               else request.getfixturevalue("pg_url"))
    with KBStore(address, clock=clock, create=True, semantic=True) as store:
        store.create_knowledge_base(KB)
        ids = store.create_articles(KB, PAGES)
    with KBStore(address, clock=clock, semantic=False) as lexical:
        lexical.save_article(KB, ids[4], content="Tips for growing tomatoes in a garden.")
        assert vectors(lexical) == len(PAGES) - 1
    with KBStore(address, clock=clock, semantic=True) as store:
            # The edited article is found by its words alone until it is embedded again.
        assert [h["match"] for h in search(store, "tomatoes")] == ["lexical"]
        store.rebuild_index(KB)  # kb reindex: every published article embedded anew
        assert vectors(store) == len(PAGES)
        assert [h["match"] for h in search(store, "tomatoes")] == ["both"]


@needs_model
def test_a_schema_7_store_is_upgraded_and_embedded(engine, tmp_path, request):
    from support.old_schemas import as_schema_7
    address = (str(tmp_path / "old.db") if engine == "sqlite"
               else request.getfixturevalue("pg_url"))
    with KBStore(address, create=True, semantic=False) as store:
        store.create_knowledge_base(KB)
        store.create_articles(KB, PAGES)
    as_schema_7(address, engine)
    with pytest.raises(kbcite.NotAStore, match="kb upgrade"):
        KBStore(address)
    assert KBStore.upgrade(address, semantic=True) == (7, kbcite.SCHEMA_VERSION)
    with KBStore(address, semantic=True) as store:
        assert vectors(store) == len(PAGES)
        assert search(store, "terminate a program")[0]["title"] == "kill"
        assert store.audit() == []


def test_fusion_keeps_exact_titles_first_and_names_each_hits_half():
    fused = fuse([1, 2, 3], [1], [(4, 0.9), (3, 0.8), (1, 0.5)], 10)
    assert fused[0] == (1, "both")
    assert dict(fused) == {1: "both", 2: "lexical", 3: "both", 4: "semantic"}
    assert [pk for pk, _ in fused][1] == 3  # found by both, ahead of either alone
    assert len(fuse([1, 2, 3], [], [(4, 0.9)], 2)) == 2


def test_the_tool_description_says_which_ranking_is_on():
    def described(hybrid):
        return next(t["description"] for t in tools_listed(hybrid)
                    if t["name"] == "search_knowledge_base")
    assert described(False).endswith(SEARCH_LEXICAL)
    assert described(True).endswith(SEARCH_HYBRID)
    assert "semantic search is on" in described(True)


def test_a_mode_other_than_auto_on_off_is_refused():
    assert embedding.mode(None) == "off"  # the suite's own environment (conftest)
    assert embedding.mode(True) == "on" and embedding.mode("AUTO") == "auto"
    with pytest.raises(ValueError, match="KBCITE_SEMANTIC"):
        embedding.mode("sometimes")
    assert not Semantic.opened(None).on


def _served(tmp_path, monkeypatch, mode, pythonpath=None):
    """A stdio server on a small store, started with KBCITE_SEMANTIC=mode: the words of its
    start, its search tool's description, the matches of a search."""
    from support.stdio_client import Client, make_db, structured
    monkeypatch.setenv("KBCITE_SEMANTIC", mode)
    db = make_db(tmp_path / "served.db")
    if pythonpath:
        monkeypatch.setenv("PYTHONPATH", pythonpath)
    client = Client(db.path)
    try:
        client.initialize()
        tools = client.call("tools/list")["result"]["tools"]
        described = next(t["description"] for t in tools if t["name"] == "search_knowledge_base")
        found = structured(client.tool("search_knowledge_base", knowledge_base_id="support",
                                       query="reset my login secret"))
        assert client.close() == 0
        said = [line for line in client.stderr().splitlines() if "search: " in line]
        return said, described, [(h["title"], h["match"]) for h in found["results"]]
    finally:
        client.kill()


@pytest.mark.slow
@needs_model
def test_a_server_with_the_half_says_so_at_start_and_in_its_tool(tmp_path, monkeypatch):
    said, described, hits = _served(tmp_path, monkeypatch, "auto")
    assert len(said) == 1 and "search: hybrid" in said[0]
    assert described.endswith(SEARCH_HYBRID)
    assert hits[0] == ("Resetting your password", "both")


@pytest.mark.slow
def test_a_server_whose_model_fails_says_one_line_naming_the_extra(tmp_path, monkeypatch):
    fake = tmp_path / "site" / "wordllama"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    said, described, hits = _served(tmp_path, monkeypatch, "on", str(tmp_path / "site"))
    assert len(said) == 1 and "search: lexical only" in said[0] and embedding.EXTRA in said[0]
    assert described.endswith(SEARCH_LEXICAL)
    assert all(match == "lexical" for _, match in hits)
