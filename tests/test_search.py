"""Search: the ranking (tiers, per-field BM25, title over body, ties by ID), scripts written
without spaces, accents, bounded work, and a reference ranking computed the slow way."""

import math
import random

import pytest

import kbcite
from kbcite import KBStore, access
from kbcite.engines import sqlite_fts, sqlite_schema
from kbcite.limits import CONTENT_MAX_BYTES
from kbcite.search import index, ranking, snippets, text, tiers
from kbcite.search.query import query_tree
from kbcite.search.snippets import SNIPPET_SCAN_CHARS
from kbcite.search.written import WrittenDocs
from support.old_schemas import as_schema_2, as_schema_9

KB = "kb-search"
GRANTED = frozenset({KB})


def kb_row(store):
    """The test knowledge base's row, as a granted caller resolves it."""
    return access.knowledge_base(store._db, KB, GRANTED)


def search(store, query, limit=10):
    return store.call_tool("search_knowledge_base", {"knowledge_base_id": KB, "query": query,
                                                     "limit": limit}, granted=GRANTED)


def titles(store, query, limit=10):
    return [hit["title"] for hit in search(store, query, limit)["results"]]


def ids(store, query, limit=10):
    return [hit["article_id"] for hit in search(store, query, limit)["results"]]



# -- the ranking, on hand-made knowledge bases --------------------------------------------------


def test_an_exact_title_beats_a_longer_title_holding_one_more_word(kb):
    longer = kb.create_article(KB, "Reset expired passwords for admins",
                               "Admins reset expired passwords here. Passwords expire.")
    exact = kb.create_article(KB, "Reset passwords for admins",
                              "How admins reset passwords.")
    assert ids(kb, "reset passwords for admins")[:2] == [exact, longer]
    # ...whoever was first, and when the longer one's body says the words more often.
    kb.save_article(KB, longer, content="Admins reset passwords, expired passwords included. "
                                        "Reset them for admins.")
    assert ids(kb, "reset passwords for admins")[0] == exact


def test_a_title_beats_a_body_mention(kb):
    body = kb.create_article(KB, "Billing basics", "Refunds: refunds take five days. Refunds!")
    title = kb.create_article(KB, "Refunds", "How we pay money back to customers.")
    assert ids(kb, "refunds") == [title, body]


def test_words_only_in_bodies_still_find_their_articles(kb):
    first = kb.create_article(KB, "Getting started", "Open the dashboard and pick a plan.")
    kb.create_article(KB, "Shipping", "We ship in two days.")
    second = kb.create_article(KB, "Plans", "A dashboard shows usage.")
    assert set(ids(kb, "dashboard")) == {first, second}
    assert ids(kb, "dashboard plan")[0] == first  # both words: the first tier


def test_every_word_comes_before_all_but_one_before_any(kb):
    any_word = kb.create_article(KB, "Alpha alpha alpha", "alpha " * 30)
    two = kb.create_article(KB, "Alpha beta", "text")
    three = kb.create_article(KB, "Gamma", "alpha beta gamma in the body only")
    assert ids(kb, "alpha beta gamma") == [three, two, any_word]


def test_ties_fall_to_the_article_id(kb):
    made = [kb.create_article(KB, "Same title", "Same body.") for _ in range(5)]
    assert ids(kb, "same title") == made
    assert ids(kb, "same body", limit=3) == made[:3]


@pytest.mark.parametrize("limit", [1, 3, 10, 20])
def test_limit_hits_whenever_enough_articles_hold_a_query_word(kb, limit):
    rng = random.Random(limit)
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    for n in range(60):
        picked = [w for w in words if rng.random() < 0.3] or ["zeta"]
        kb.create_article(KB, "Note %d %s" % (n, picked[0]), " ".join(picked) + " filler")
    for query in ("alpha", "alpha beta", "alpha beta gamma delta", "epsilon zeta gamma"):
        holding = sum(1 for a in kb.list_articles(KB)
                      if set(text.tokens(a["title"] + " " + kb.get_article(
                          KB, a["article_id"])["content"])) & set(text.query_terms(query)))
        assert len(ids(kb, query, limit)) == min(limit, holding), query


def test_a_word_no_article_holds_is_ignored(kb):
    both = kb.create_article(KB, "Refund policy", "Refund rules.")
    kb.create_article(KB, "Refund window", "Thirty days.")
    assert ids(kb, "refund policy zzyzx")[0] == both
    assert ids(kb, "zzyzx qqq") == []


def test_stopwords_are_dropped_unless_they_are_all_there_is(kb):
    article = kb.create_article(KB, "How to export", "Exporting data.")
    kb.create_article(KB, "The end", "Nothing here but words: the and of.")
    assert ids(kb, "how do I export") == [article]
    assert len(ids(kb, "the")) == 1


# -- scripts, accents, odd text ------------------------------------------------------------------


def test_chinese_is_found_by_its_characters(kb):
    policy = kb.create_article(KB, "退款政策", "退款在五个工作日内完成。")
    other = kb.create_article(KB, "发货时间", "我们在两天内发货。")
    assert ids(kb, "退款") == [policy]
    assert ids(kb, "政策") == [policy]
    assert ids(kb, "工作日") == [policy]
    assert ids(kb, "发货") == [other]
    assert ids(kb, "退款 发货") == [policy, other] or ids(kb, "退款 发货") == [other, policy]


def test_japanese_is_found_by_its_characters(kb):
    article = kb.create_article(KB, "パスワードの再設定", "設定画面からパスワードを再設定します。")
    assert ids(kb, "パスワード") == [article]
    assert ids(kb, "再設定") == [article]
    assert ids(kb, "ｶﾀｶﾅ") == []  # half-width katakana folds to full width, and is not there


def test_hindi_words_keep_their_vowel_signs(kb):
    article = kb.create_article(KB, "हिंदी में खोज", "यह लेख हिंदी में लिखा है।")
    kb.create_article(KB, "English", "Only English words.")
    assert ids(kb, "खोज") == [article]
    assert ids(kb, "लिखा") == [article]
    assert ids(kb, "है") == [article]  # the danda is punctuation, not part of the word


def test_accents_fold_for_latin_scripts(kb):
    cafe = kb.create_article(KB, "Café menu", "Crème brûlée and naïve coffee.")
    assert ids(kb, "cafe") == [cafe]
    assert ids(kb, "CAFÉ") == [cafe]
    assert ids(kb, "creme brulee") == [cafe]
    assert "**Café**" in search(kb, "cafe")["results"][0]["snippet"] or \
        "**Crème**" in search(kb, "creme")["results"][0]["snippet"]


def test_snippets_mark_words_of_any_script(kb):
    kb.create_article(KB, "Refunds", "Plain text. We refund within 5 days. More text after.")
    kb.create_article(KB, "退款政策", "退款在五个工作日内完成。")
    assert "**refund**" in search(kb, "refund")["results"][0]["snippet"]
    assert "**" in search(kb, "退款")["results"][0]["snippet"]


def test_a_hits_snippet_looks_only_for_the_words_its_body_holds(kb, monkeypatch):
    """Scoring tells each hit which query words its body holds: its snippet scans the text
    for those alone, and marks each of them; a word of the title only is not looked for."""
    kb.create_article(KB, "Refund policy", "Refunds are paid within five days, by transfer.")
    scanned, real = [], snippets._find_ascii

    def spy(text, terms, held=-1):
        scanned.append({term for term, bit in terms if held & bit})
        return real(text, terms, held)

    monkeypatch.setattr(snippets, "_find_ascii", spy)
    hit = search(kb, "policy refunds transfer")["results"][0]
    assert scanned == [{"refunds", "transfer"}]
    assert "**Refunds**" in hit["snippet"] and "**transfer**" in hit["snippet"]
    # Told nothing, a snippet looks for every word; told wrongly, it trusts the bits.
    body = "Refunds are paid within five days, by transfer."
    assert snippets.make_snippet(body, ["policy", "refunds", "transfer"]) == hit["snippet"]
    assert "**" not in snippets.make_snippet(body, ["refunds"], held=0)


# -- bounded work --------------------------------------------------------------------------------


def test_the_any_word_tier_never_scores_every_matching_article(kb):
    bodies = [("Common topic %d" % n, "common words everywhere, number %d" % n)
              for n in range(1000)]
    kb.create_articles(KB, bodies)
    kb.create_article(KB, "Rare one", "alpha")
    kb.create_article(KB, "Rare two", "beta")
    found = search(kb, "common alpha beta", limit=10)["results"]
    assert len(found) == 10
    work = kb.last_search
    # Three words, each index query capped: far fewer than the 1,002 articles that match.
    assert work["scored"] <= 3 * 2 * ranking.CANDIDATES_PER_QUERY
    assert work["scored"] < 300


def test_megabyte_articles_of_one_word_cost_a_bounded_search(kb):
    """The planted case: twenty 1 MiB articles of one repeated word."""
    big = "alpha " * (CONTENT_MAX_BYTES // 6 - 1)
    kb.create_articles(KB, [("Big %d" % n, big) for n in range(20)])
    kb.create_article(KB, "Small", "alpha beta")
    found = search(kb, "alpha beta", limit=20)["results"]
    assert len(found) == 20 and found[0]["title"] == "Small"
    work = kb.last_search
    # The snippets read a window of each hit, not its megabyte; nothing scans every token.
    assert work["snippet_chars"] <= 20 * SNIPPET_SCAN_CHARS
    assert work["scored"] <= 21


# -- the reference: every article scored the slow way -------------------------------------------


def reference(articles, query, limit):
    """The documented ranking, computed over every published article from its raw text."""
    said = text.tokens(query)
    terms = text.query_terms(query)
    docs = []
    for article_id, title, content in articles:
        docs.append((article_id, text.tokens(title), text.tokens(content)))
    held_somewhere = [t for t in terms if any(t in ti or t in bo for _, ti, bo in docs)]
    terms = held_somewhere
    if not terms:
        return []
    n = len(docs)
    avg_title = sum(len(ti) for _, ti, _ in docs) / n
    avg_body = sum(len(bo) for _, _, bo in docs) / n

    def idf(term):
        df = max(sum(1 for _, ti, _ in docs if term in ti),
                 sum(1 for _, _, bo in docs if term in bo))
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def words(tokens):
        content = [t for t in tokens if t not in text.STOPWORDS]
        return content or list(tokens)

    def norm(length, avg):
        return 0.25 + 0.75 * length / avg

    tiered = len(terms) <= tiers.TIERED_TERMS_MAX
    phrase = words(said)
    ranked = []
    for article_id, title, body in docs:
        held, total = 0, 0.0
        for term in terms:
            tf_title, tf_body = title.count(term), body.count(term)
            if tf_title or tf_body:
                held += 1
                tf = (ranking.TITLE_WEIGHT * tf_title / norm(len(title), avg_title)
                      + tf_body / norm(len(body), avg_body))
                total += said.count(term) * idf(term) * tf * 2.2 / (tf + 1.2)
        if not held:
            continue
        named = words(title)
        # The title said whole, in order, by a short query: its words' idf, three times.
        if tiered and any(phrase[i:i + len(named)] == named for i in range(len(phrase))):
            total += ranking.TITLE_PHRASE_WEIGHT * sum(idf(t) for t in set(named))
        tier = min(len(terms) - held, 2) if tiered else 0
        ranked.append((named != phrase, tier, -total, article_id))
    ranked.sort()
    return [article_id for _, _, _, article_id in ranked[:limit]]


@pytest.mark.slow
def test_the_store_ranks_as_the_reference_does(kb, monkeypatch):
    # Uncapped index queries gather every tier whole: the bounded search must then give
    # exactly the exhaustive ranking (the bound itself is tested above).
    monkeypatch.setattr(tiers, "CANDIDATES_PER_QUERY", 10 ** 6)
    monkeypatch.setattr(tiers, "QUESTION_CANDIDATES", 10 ** 6)
    rng = random.Random(11)
    vocabulary = ("reset password admin export invoice refund plan team billing sso login "
                  "token webhook domain quota audit report café 退款政策 हिंदी").split()
    articles = []
    for n in range(120):
        title = " ".join(rng.choice(vocabulary) for _ in range(1 + int(rng.random() * 4)))
        body = " ".join(rng.choice(vocabulary) for _ in range(3 + int(rng.random() * 40)))
        article_id = kb.create_article(KB, title, body)
        articles.append((article_id, title, body))
    for n in range(0, 120, 9):  # some saves and withdrawals, so statistics move
        article_id, title, body = articles[n]
        if n % 2:
            kb.unpublish(KB, article_id)
            articles[n] = None
        else:
            body = body + " " + rng.choice(vocabulary)
            kb.save_article(KB, article_id, content=body)
            articles[n] = (article_id, title, body)
    published = [a for a in articles if a is not None]
    queries = ["reset password", "refund", "export invoice plan", "team billing sso login",
               "cafe", "退款", "हिंदी", "audit report quota domain token", "zzz refund",
               "the refund plan", "reset the reset password for the team plan billing",
               "export export invoice"]
    queries += [" ".join(rng.choice(vocabulary) for _ in range(1 + int(rng.random() * 8)))
                for _ in range(60)]
    compared = 0
    for query in queries:
        for limit in (1, 5, 20):
            expected = reference(published, query, limit)
            got = ids(kb, query, limit)
            assert got == expected, (query, limit, kb.last_search, got, expected)
            compared += len(expected)
    assert compared > 1000


def test_a_question_whose_rare_words_decide_stops_at_their_lists(kb):
    # The rare word's three articles outscore anything the common words alone can give, so
    # the search proves its hits after that word's list, as the exhaustive ranking has them.
    articles = [(kb.create_article(KB, "Zebra crossing %d" % n, "zebra alpha beta"),
                 "Zebra crossing %d" % n, "zebra alpha beta") for n in range(3)]
    for n in range(40):
        title, body = "Common page %d" % n, "alpha beta gamma delta " * (1 + n % 4)
        articles.append((kb.create_article(KB, title, body), title, body))
    query = "zebra alpha beta gamma delta"
    found = ids(kb, query, limit=3)
    assert found == reference(articles, query, 3) == [a[0] for a in articles[:3]]
    assert kb.last_search["scored"] == 3
    # Asked for more than the rare word holds, it reads the common words' articles too.
    assert ids(kb, query, limit=5) == reference(articles, query, 5)
    assert kb.last_search["scored"] > 3


def test_the_any_word_tier_takes_the_shortest_titles_first(kb, monkeypatch):
    monkeypatch.setattr(tiers, "CANDIDATES_PER_QUERY", 3)
    # Many articles hold "alpha" in a long title, created first; one holds it in a short one.
    for n in range(30):
        kb.create_article(KB, "alpha in a long title number %d with many words" % n, "text")
    short = kb.create_article(KB, "Alpha", "text")
    kb.create_article(KB, "beta gamma", "beta gamma")  # the all-but-one tier for the query
    found = ids(kb, "alpha beta gamma delta", limit=3)
    assert len(found) == 3
    assert short in found  # the shortest title holding the word, though the newest
    assert kb.last_search["scored"] < 20


# -- the all-but-one query ----------------------------------------------------------------------


def holds(tree, present):
    """Whether an article holding the terms ``present`` satisfies a ``query_tree`` query."""
    if isinstance(tree, str):
        return tree in present
    op, children = tree
    return (all if op == "and" else any)(holds(child, present) for child in children)


@pytest.mark.parametrize("size", range(2, tiers.TIERED_TERMS_MAX + 1))
def test_all_but_one_is_exactly_the_articles_missing_at_most_one_term(size):
    terms = ["t%d" % n for n in range(size)]
    tree = query_tree(terms, 1)
    for mask in range(1 << size):
        present = {term for n, term in enumerate(terms) if mask >> n & 1}
        assert holds(tree, present) == (len(present) >= size - 1), (size, sorted(present))
    assert holds(query_tree(terms, 0), set(terms))
    assert not holds(query_tree(terms, 0), set(terms[1:]))
    # Each term is asked for about log2(size) times, where one query per left-out term asks
    # for it size times: the point of the halving.
    asked = []

    def walk(node):
        if isinstance(node, str):
            asked.append(node)
        else:
            for child in node[1]:
                walk(child)

    walk(tree)
    assert set(asked) == set(terms)
    assert max(asked.count(term) for term in terms) <= size.bit_length()


def test_the_index_answers_all_but_one_on_both_engines(kb):
    words = ["alpha", "beta", "gamma", "delta"]
    expected, in_title = set(), set()
    for mask in range(1, 1 << len(words)):
        present = [w for n, w in enumerate(words) if mask >> n & 1]
        # odd masks carry their words in the title, even ones in the body
        title, body = (" ".join(present), "text") if mask % 2 else ("Other", " ".join(present))
        article_id = kb.create_article(KB, title, body)
        pk = access.article(kb._db, kb_row(kb), article_id, True)["pk"]
        if len(present) >= len(words) - 1:
            expected.add(pk)
            if mask % 2:
                in_title.add(pk)
    kb_pk = kb_row(kb)["pk"]
    with kb._db.read():
        anywhere, titled, every = kb._db.match(kb_pk, [(words, False, 1), (words, True, 1),
                                                       (words, False, 0)], 100)
        first_two = kb._db.match(kb_pk, [(words, False, 1)], 2)[0]
    assert set(anywhere) == expected and len(expected) == 5
    assert set(titled) == in_title and in_title
    assert len(every) == 1
    assert anywhere == sorted(anywhere) and first_two == sorted(expected)[:2]


# -- the index of titles ------------------------------------------------------------------------


def fill_for_title_queries(store):
    """A knowledge base where the all-but-one query fills its cap, so that the title-only
    queries run: many articles hold three of four words in bodies, a few in titles."""
    store.create_knowledge_base(KB)
    store.create_articles(KB, [("Note %d" % n, "alpha beta gamma, note %d" % n)
                               for n in range(40)])
    titled = [store.create_article(KB, title, "text")
              for title in ("Alpha beta gamma", "Alpha beta delta", "Beta gamma delta",
                            "Alpha gamma", "Gamma delta")]
    store.save_article(KB, titled[3], title="Alpha gamma delta")  # a title changed
    store.unpublish(KB, titled[4])
    return ["alpha beta gamma delta", "alpha gamma", "gamma delta beta", "note alpha"]


def titles_index(store, kb_pk):
    with store._db.read():
        return store._db.title_indexed_pks(kb_pk)


def test_the_title_only_queries_read_the_index_of_titles(store, monkeypatch):
    monkeypatch.setattr(tiers, "CANDIDATES_PER_QUERY", 3)
    fill_for_title_queries(store)
    found = search(store, "alpha beta gamma delta", limit=3)["results"]
    # Forty bodies, first by ID, hold three of the four words; the three first articles
    # holding three in their titles still rank first: only the title-only query reaches them
    # past the cap of three.
    assert {hit["title"] for hit in found} == {"Alpha beta gamma", "Alpha beta delta",
                                               "Beta gamma delta"}
    kb_pk = kb_row(store)["pk"]
    with store._db.read():
        titled = store._db.match(kb_pk, [(["gamma", "delta"], True, 0)], 100)[0]
    # the changed title is indexed anew; the withdrawn one is gone
    assert [store._db.row("SELECT title FROM articles WHERE pk = ?", (pk,))["title"]
            for pk in titled] == ["Beta gamma delta", "Alpha gamma delta"]
    assert store.audit() == []


def test_the_audit_finds_a_damaged_index_of_titles(store, engine):
    fill_for_title_queries(store)
    kb_pk = kb_row(store)["pk"]
    pk = titles_index(store, kb_pk)[-1]
    with store._db.write():
        db = store._db
        if engine == "sqlite":
            title = db.row("SELECT title_terms FROM search_docs WHERE pk = ?", (pk,))
            db.execute("INSERT INTO fts_title_{0} (fts_title_{0}, rowid, title) VALUES "
                       "('delete', ?, ?)".format(kb_pk), (pk, title["title_terms"]))
        else:
            db.execute("UPDATE search_docs SET title_tsv = ''::tsvector WHERE pk = ?", (pk,))
    assert [p for p in store.audit() if "index of titles" in p] == [
        "knowledge base %r: the index of titles differs from its articles' titles" % KB]
    store.rebuild_index(KB)
    assert store.audit() == []


def test_a_schema_2_store_is_upgraded_with_its_index_of_titles(engine, tmp_path, request,
                                                                monkeypatch):
    monkeypatch.setattr(tiers, "CANDIDATES_PER_QUERY", 3)
    address = (str(tmp_path / "old.db") if engine == "sqlite"
               else request.getfixturevalue("pg_url"))
    with KBStore(address, create=True) as store:
        queries = fill_for_title_queries(store)
        before = [ids(store, query, 5) for query in queries]
    as_schema_2(address, engine)
    with pytest.raises(kbcite.NotAStore, match="kb upgrade"):
        KBStore(address)
    assert KBStore.upgrade(address) == (2, kbcite.SCHEMA_VERSION)
    with KBStore(address) as store:
        assert store.audit() == []
        assert [ids(store, query, 5) for query in queries] == before
        kb_pk = kb_row(store)["pk"]
        assert len(titles_index(store, kb_pk)) == 44  # every published title


def test_a_schema_9_store_is_upgraded_to_bodies_by_term_id(engine, tmp_path, request):
    address = (str(tmp_path / "old.db") if engine == "sqlite"
               else request.getfixturevalue("pg_url"))
    with KBStore(address, create=True) as store:
        queries = fill_for_title_queries(store)
        before = [ids(store, query, 5) for query in queries]
    as_schema_9(address, engine)
    with pytest.raises(kbcite.NotAStore, match="kb upgrade"):
        KBStore(address)
    assert KBStore.upgrade(address) == (9, kbcite.SCHEMA_VERSION)
    with KBStore(address) as store:
        assert store.audit() == []
        assert [ids(store, query, 5) for query in queries] == before
        body = store._db.row("SELECT body FROM search_docs LIMIT 1")["body"]
        assert isinstance(body, bytes) and body


def test_a_stored_body_finds_each_count_by_its_terms_id():
    # IDs and counts across the one-, two- and three-digit boundaries, and IDs whose
    # digits are another ID's tail or head: each lookup finds its own entry, or nothing.
    rng = random.Random(7)
    term_ids = sorted(set(rng.sample(range(1, 300000), 400) + [
        0, 1, 63, 64, 65, 127, 128, 4095, 4096, 2 ** 18 - 1, 2 ** 18, 5, 5 * 64, 5 * 64 + 5]))
    counts = {("t%d" % i): rng.choice([1, 1, 2, 3, 63, 64, 65, 4096, 10 ** 6])
              for i in term_ids[::2]}
    ids = {("t%d" % i): i for i in term_ids}
    doc = ranking.SearchDoc(("x",), counts, 1, sum(counts.values()))
    body = doc.body_bytes(ids)
    for term, term_id in ids.items():
        assert ranking.body_count(body, ranking.term_key(term_id)) == counts.get(term, 0), term
    # score reads the same counts in its own loop: one needle of factor 1, whose body norm is
    # 1 (the body's length its average), scores count / (count + K1).
    row = {"title_terms": "x", "title_len": 1, "body": body, "body_len": doc.body_len}
    stats = {"avg_title": 1.0, "avg_body": float(doc.body_len), "phrase": ""}
    for term, term_id in ids.items():
        count = counts.get(term, 0)
        held, total, in_body = ranking.score(
            row, [(term, ranking.term_key(term_id)[0], 1.0, 1)], stats)
        assert (held, in_body) == ((1, 1) if count else (0, 0)), term
        assert total == pytest.approx(count / (count + ranking.BM25_K1)), term
    names = {i: t for t, i in ids.items()}
    assert ranking.SearchDoc.stored({"title_terms": "x", "title_len": 1, "body": body,
                                     "body_len": doc.body_len}, names) == doc
    with pytest.raises(ValueError, match="inside a term ID"):
        ranking.decode_body(body + bytes([ranking.MORE | 1]))
    with pytest.raises(ValueError, match="without its term ID"):
        ranking.decode_body(bytes([ranking.COUNT | 3]) + body)


def test_a_body_naming_an_unknown_term_id_is_damage_the_audit_reports(store, engine):
    store.create_knowledge_base(KB)
    art = store.create_article(KB, "Refunds", "How refunds work")
    store.create_article(KB, "Shipping", "We ship in two days")
    assert store.audit() == []
    with store._db.write():
        store._db.execute("UPDATE search_docs SET body = ? WHERE pk = (SELECT pk FROM articles "
                          "WHERE article_id = ?)", (ranking.term_key(10 ** 6)[0],
                                                    art))
    problems = store.audit()
    assert any("search statistics of article" in p and "KeyError" in p for p in problems), problems
    # An edit of that article finds the damage and writes nothing.
    with pytest.raises(kbcite.StoreDamaged):
        store.save_article(KB, art, content="New text")
    assert store.get_article(KB, art)["content"] == "How refunds work"
    store.rebuild_index(KB)
    assert store.audit() == []


def test_an_article_without_a_word_is_no_damage_to_the_audit(store, engine):
    store.create_knowledge_base(KB)
    store.create_article(KB, "!!!", "...")  # nothing to index, and nothing to find it by
    store.create_article(KB, "Refunds", "How refunds work")
    assert store.audit() == []
    kb_pk = kb_row(store)["pk"]
    with store._db.write():  # the worded article's tokens leave the index of everything
        if engine == "sqlite":
            store._db.execute("DROP TABLE fts_%d" % kb_pk)
            store._db.execute(sqlite_schema.FTS_SQL.format(pk=kb_pk))
        else:
            store._db.execute("UPDATE search_docs SET tsv = ''::tsvector WHERE kb_pk = ?",
                              (kb_pk,))
    assert store.audit() == ["knowledge base %r: 0 indexed, 1 published with words to index"
                             % KB]


def test_an_exact_title_comes_first_whatever_the_bodies_say(kb):
    """docs/search.md's example: a longer title with the words in its body too loses to the
    title the query is."""
    kb.create_article(KB, "Refund policy enterprise", "Enterprise refunds follow the contract. "
                      "Refund policy details for enterprise customers. Refund policy.")
    kb.create_article(KB, "Refund policy", "Refunds take five working days.")
    kb.create_article(KB, "Shipping", "We ship in two days.")
    assert [h["title"] for h in search(kb, "Refund policy")["results"]] == [
        "Refund policy", "Refund policy enterprise"]
    # Function words aside: "the refund policy" names it too.
    assert search(kb, "the refund policy")["results"][0]["title"] == "Refund policy"


def test_a_title_the_query_says_outranks_pages_sharing_a_word(kb):
    """The known-item case: the page named by a word of the question, described in its body
    with the option letters in brackets, before pages that say the words more often."""
    tar = kb.create_article(KB, "tar", "> Archiving utility.\n\n- E[x]tract a (compressed) "
                            "archive [f]ile into the current directory:\n`tar xvf source.tar`")
    kb.create_article(KB, "dtrx", "Extract an archive of any kind (a tar archive, zip) into "
                      "a folder. Extract a tar archive: `dtrx archive.tar`")
    kb.create_article(KB, "git archive", "Create a tar archive of a tree; extract it with tar.")
    assert ids(kb, "extract a tar archive")[0] == tar
    assert text.tokens("E[x]tract [c]reate Lis[t] a [b] c") == [
        "extract", "create", "list", "a", "b", "c"]


def test_a_long_question_ranks_by_score_not_by_how_many_words_it_holds(kb):
    # Five words or more is a question: an article holding the rare words ranks above one
    # holding more, but common, words.
    for n in range(30):
        kb.create_article(KB, "Note %d" % n, "common words about systems and methods")
    rare = kb.create_article(KB, "Thesaurus construction", "Building a thesaurus by hand.")
    kb.create_article(KB, "Systems and methods", "common words about systems and methods, "
                      "retrieval")
    found = ids(kb, "methods of thesaurus construction for retrieval systems, common words")
    assert found[0] == rare


def test_odd_queries_are_ranked_never_refused(kb):
    """Only function words, only punctuation, the longest query, every script at once."""
    kb.create_article(KB, "The end", "Nothing here but words: the and of.")
    kb.create_article(KB, "退款政策", "退款在五个工作日内完成。")
    kb.create_article(KB, "हिंदी सहायता", "हिंदी में सहायता। Café crème. Ελληνικά κείμενα.")
    assert titles(kb, "the and of") == ["The end"]
    assert titles(kb, "?!?! ... -- []") == []
    mixed = ("退款 हिंदी café Ελληνικά кириллица 한국어 العربية " * 10)[:200]
    found = titles(kb, mixed)
    assert set(found) == {"退款政策", "हिंदी सहायता"} and len(mixed) == 200
    with pytest.raises(kbcite.ToolError) as exc:  # the stated limit: 200 characters
        search(kb, "x" * 500)
    assert "query" in exc.value.message


def test_a_long_title_asked_whole_comes_first_however_common_its_words(kb):
    """A question of six words that is an article's title: found first, though each word is
    in more articles than a question gathers and shorter titles hold each one."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    kb.create_articles(KB, [(w.title(), "%s filler" % w) for w in words for _ in range(30)]
                       + [("Note %d" % n, " ".join(words)) for n in range(160)])
    asked = kb.create_article(KB, "Alpha beta gamma delta epsilon zeta", "text")
    assert ids(kb, "alpha beta gamma delta epsilon zeta")[0] == asked


def test_a_question_of_common_words_gathers_the_titles_holding_its_rarest_words(kb, monkeypatch):
    """Every word of the question is in more articles than a question gathers: the best
    answer, whose title holds the rarest three and whose body holds them all, is found
    though it is the newest and its title is long (the exhaustive ranking agrees)."""
    monkeypatch.setattr(tiers, "QUESTION_CANDIDATES", 10)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    made = [(w.title(), "%s filler" % w) for i, w in enumerate(words) for _ in range(12 + 4 * i)]
    made += [("Note %d" % n, " ".join(words)) for n in range(30)]
    made += [("Alpha beta gamma: the handbook of the team", " ".join(words) + " in practice")]
    created = kb.create_articles(KB, made)
    query = "alpha beta gamma delta epsilon zeta"
    expected = reference(list(zip(created, *zip(*made))), query, 10)
    assert expected[0] == created[-1]
    assert ids(kb, query) == expected
    assert kb.last_search["scored"] <= 3 * 10 + 32 * 10


def test_a_question_finds_the_article_holding_every_word_when_more_hold_its_rarest_four(
        kb, monkeypatch):
    """More articles hold the rarest four words of a question of common words than it
    gathers (the first by ID of them do not hold the rest): the articles holding every word
    are then asked on their own, and the one that does comes first."""
    monkeypatch.setattr(tiers, "QUESTION_CANDIDATES", 5)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    made = [(w.title(), "%s filler" % w) for i, w in enumerate(words) for _ in range(12 + 4 * i)]
    made += [("Four %d" % n, " ".join(words[:4]) + " filler filler") for n in range(8)]
    made += [("Target", " ".join(words))]
    created = kb.create_articles(KB, made)
    query = " ".join(words)
    assert reference(list(zip(created, *zip(*made))), query, 1) == [created[-1]]
    assert ids(kb, query)[0] == created[-1]


def test_a_question_of_common_words_held_together_nowhere_still_fills_its_places(
        kb, monkeypatch):
    """No article holds every word of a question of common words, and no title its rarest
    three: the places are filled by the shortest titles holding the rarest word, or, where
    no title holds it, by the articles holding it in the body, as the exhaustive ranking
    orders them."""
    monkeypatch.setattr(tiers, "QUESTION_CANDIDATES", 5)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    made = [(w.title(), "%s filler" % w) for i, w in enumerate(words) for _ in range(12 + 4 * i)]
    spoken = ["kilo", "lima", "mike", "november", "oscar"]  # in bodies only
    made += [("Note %d %d" % (i, n), "%s filler" % w) for i, w in enumerate(spoken)
             for n in range(8 + 3 * i)]
    created = kb.create_articles(KB, made)
    articles = list(zip(created, *zip(*made)))
    for query in (" ".join(words), " ".join(spoken)):
        expected = reference(articles, query, 10)
        assert len(expected) == 10
        assert ids(kb, query) == expected, query


def test_a_question_finds_its_title_when_more_titles_hold_its_rarest_words_than_it_gathers(
        kb, monkeypatch):
    """More titles hold the rarest three words than a question gathers, and more articles
    every word: the titles holding every word are then asked on their own, and the title
    the question is comes first."""
    monkeypatch.setattr(tiers, "QUESTION_CANDIDATES", 5)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    made = [(w.title(), "%s filler" % w) for i, w in enumerate(words) for _ in range(12 + 4 * i)]
    made += [("Alpha beta gamma %d" % n, "text") for n in range(8)]
    made += [("Note %d" % n, " ".join(words)) for n in range(8)]  # every word, in the body
    made += [("Alpha beta gamma delta epsilon zeta", "text")]
    created = kb.create_articles(KB, made)
    assert ids(kb, "alpha beta gamma delta epsilon zeta")[0] == created[-1]


def test_an_edit_tells_the_index_to_forget_exactly_the_tokens_it_was_given(store):
    """An edit makes the old text's tokens again (not read back by their IDs) only where they
    are, byte for byte, what the index holds; otherwise it reads them back."""
    store.create_knowledge_base(KB)
    pk_of = {}
    for title, content in (("Refund policy", "Refunds take five days, five at most."),
                           ("Shipping", "Parcels leave daily.")):
        pk_of[store.create_article(KB, title, content)] = title
    article_id = next(a for a, t in pk_of.items() if t == "Refund policy")
    db = store._db
    with db.write():
        kb = access.knowledge_base(db, KB, GRANTED, lock=True)
        row = access.article(db, kb, article_id, published_only=False)
        ids_known = db.search.term_ids_known(kb["pk"], ["refunds", "five", "nowhere"])
        assert set(ids_known) == {"refunds", "five"}  # looked up, never added
        stored = db.search.doc(row["pk"])
        made = index.made_again(stored, (row["title"], row["content"]), {}, db, kb)
        assert made == index.read_back(db, kb, stored)
        # A text that is not what the index holds (a tokenizer changed, a caller's mistake):
        # not trusted, whichever part differs.
        for was in (("Refund policy", "Refunds take six days, six at most."),
                    # the same words and length, another count: only the bytes tell
                    ("Refund policy", "Refunds take five days, take at most."),
                    ("Refund policy", "Refunds take five days, five at most. Five!"),
                    ("Refund rules", row["content"])):
            assert index.made_again(stored, was, {}, db, kb) is None
        # An edit given the wrong text before still forgets exactly what was indexed.
        index.reindex(db, kb, row["pk"], True, "Refund policy", "Returns within a week.", True,
                      was=("Refund policy", "Refunds take six days, six at most."))
    # (The article's row keeps its text: only the index was told of the new one.)
    assert ids(store, "five") == [] and ids(store, "refunds") == []
    assert ids(store, "week") == [article_id]
    assert store.audit() == []
    # And an edit through the tool, its text before given (and true), keeps it exact.
    store.save_article(KB, article_id, content="Refunds take five days.")
    assert ids(store, "week") == [] and ids(store, "five") == [article_id]
    assert store.audit() == []


def index_holds_its_text(store, article_id):
    """Whether the article's stored search row, read back by its term IDs, is exactly its
    text's tokens."""
    db = store._db
    with db.read():
        kb = access.knowledge_base(db, KB, GRANTED)
        row = access.article(db, kb, article_id, published_only=False)
        stored = index.read_back(db, kb, db.search.doc(row["pk"]))
    return stored == ranking.SearchDoc.of(row["title"], row["content"])


def asked_ids(store, monkeypatch):
    """The terms each ``term_ids`` call of the store's search table is asked for, in order."""
    asked = []
    table = type(store._db.search)
    real = table.term_ids

    def term_ids(search, kb_pk, terms):
        asked.append(set(terms))
        return real(search, kb_pk, terms)
    monkeypatch.setattr(table, "term_ids", term_ids)
    return asked


@pytest.fixture
def shared_address(address, tmp_path):
    """An address two connections can share: a file where the engine's is in memory."""
    return str(tmp_path / "shared.sqlite3") if address == ":memory:" else address


def test_an_edit_after_the_connections_own_looks_up_only_the_terms_it_changes(
        shared_address, clock, monkeypatch):
    """What a connection last wrote of an article stands for the next edit's text before,
    and gives the IDs of the terms whose counts it keeps; a write from elsewhere in between
    (another connection's, a rebuild's) makes the next edit look every term up again."""
    with KBStore(shared_address, clock=clock, create=True) as store:
        edit_after_edit(store, asked_ids(store, monkeypatch), shared_address)


def edit_after_edit(store, asked, address):
    store.create_knowledge_base(KB)
    body = " ".join("word%d" % n for n in range(60))
    article_id = store.create_article(KB, "Refund policy", body)
    store.create_article(KB, "Shipping", "Parcels leave daily; word7 too.")
    store.save_article(KB, article_id, content=body + " refunds")
    assert len(asked[-1]) == 63  # the first edit on this connection: every term
    store.save_article(KB, article_id, content=body + " refunds refunds five")
    # A count changed, a term is new; the title's terms are not in the body's bytes.
    assert asked[-1] == {"refunds", "five", "refund", "policy"}
    assert index_holds_its_text(store, article_id)
    assert ids(store, "five") == [article_id]
    with KBStore(address) as other:
        other.save_article(KB, article_id, content=body + " five six")
        store.save_article(KB, article_id, content=body + " five six seven")
        assert len(asked[-1]) == 65  # the row is not what this connection wrote
        other.rebuild_index(KB)  # the term IDs numbered again
        store.save_article(KB, article_id, content=body + " six seven")
        assert index_holds_its_text(store, article_id)
        assert other.audit() == []
    assert ids(store, "seven") == [article_id] and ids(store, "five") == []
    assert sorted(ids(store, "word7")) == sorted([article_id, ids(store, "parcels")[0]])
    assert store.audit() == []


def test_a_rolled_back_edit_or_a_remembered_id_that_is_wrong_is_not_trusted(
        store, monkeypatch):
    """An edit rolled back after its index work leaves the text before in the row, so what
    it remembered does not answer for it; an ID remembered that a lookup contradicts sends
    the edit back to looking every term up."""
    asked = asked_ids(store, monkeypatch)
    store.create_knowledge_base(KB)
    body = " ".join("word%d" % n for n in range(40))
    article_id = store.create_article(KB, "Notes", body)
    store.save_article(KB, article_id, content=body + " alpha")
    real_record = kbcite.history.record

    def fail(*args, **kwargs):
        raise RuntimeError("the disk went away")
    monkeypatch.setattr(kbcite.history, "record", fail)
    with pytest.raises(Exception):
        store.save_article(KB, article_id, content=body + " alpha beta")
    monkeypatch.setattr(kbcite.history, "record", real_record)
    store.save_article(KB, article_id, content=body + " alpha gamma")
    assert len(asked[-1]) == 43  # the rolled-back edit's text is not the row's
    assert index_holds_its_text(store, article_id)
    # A remembered ID that the store no longer gives that term.
    _, entry = next(iter(store._ctx.written._entries.items()))
    entry[2]["alpha"] = 10 ** 6
    store.save_article(KB, article_id, content=body + " alpha alpha gamma")
    assert len(asked[-1]) == 43 and len(asked[-2]) == 2  # alpha, notes: then all
    assert index_holds_its_text(store, article_id)
    assert ids(store, "alpha") == [article_id] and ids(store, "beta") == []
    assert store.audit() == []


def test_written_docs_keep_the_most_recent_articles():
    """The entries are bounded: the article written longest ago goes first."""
    written = WrittenDocs(size=2)
    doc = ranking.SearchDoc.of("T", "a b")
    for pk in (1, 2, 3):
        written.put(7, pk, ("T", "a b"), doc, {"t": 0, "a": 1, "b": 2}, b"body")
    row = {"title_terms": "t", "title_len": 1, "body_len": 2, "body": b"body"}
    assert written.get(7, 1, ("T", "a b"), row) is None
    assert written.get(7, 3, ("T", "a b"), row) == (doc, {"t": 0, "a": 1, "b": 2})
    assert written.get(7, 3, ("T", "a c"), row) is None  # another text: forgotten
    assert written.get(7, 2, ("T", "a b"), dict(row, body=b"other")) is None
    # And their texts within the characters allowed: the oldest go, a text too long stays out.
    written = WrittenDocs(size=8, chars=10)
    for pk in (1, 2, 3):
        written.put(7, pk, ("T", "a b"), doc, {"t": 0, "a": 1, "b": 2}, b"body")
    assert [written.get(7, pk, ("T", "a b"), row) is not None for pk in (1, 2, 3)] == \
        [False, True, True]
    written.put(7, 4, ("T", "a b c d e f"), doc, {}, b"body")
    assert written.get(7, 4, ("T", "a b c d e f"), row) is None
    assert written.get(7, 3, ("T", "a b"), row) is not None


def test_a_store_whose_index_keeps_columns_answers_the_same(tmp_path, monkeypatch):
    """Stores made before the index of titles and bodies dropped its columns (detail=column)
    keep their tables: searched, edited and audited alike."""
    texts = [("Refund policy", "Refunds take five days."), ("Shipping rules", "Parcels leave "
             "daily; refunds of postage take a week."), ("Refund window", "Thirty days.")]
    answers = {}
    for detail in ("none", "column"):
        monkeypatch.setattr(sqlite_fts, "FTS_SQL",
                            sqlite_schema.FTS_SQL.replace("detail=none", "detail=" + detail))
        path = str(tmp_path / ("%s.db" % detail))
        with KBStore(path, create=True) as made:
            made.create_knowledge_base(KB)
            made.create_articles(KB, texts)
            assert "detail=%s" % detail in made._db.row(
                "SELECT sql FROM sqlite_master WHERE name = 'fts_1'")["sql"]
        monkeypatch.undo()
        with KBStore(path) as store:
            store.save_article(KB, "art-000003", content="Thirty days, refunds included.")
            answers[detail] = [ids(store, q) for q in ("refund", "refunds take", "days")]
            assert store.audit() == []
    assert answers["none"] == answers["column"]
    assert answers["none"][1][0] == "art-000001"


def test_term_ids_and_names_read_as_tuples_agree_with_the_rows(store, engine):
    store.create_knowledge_base(KB)
    store.create_article(KB, "Refund policy", "Refunds take five working days, refund fast")
    kb_pk = kb_row(store)["pk"]
    with store._db.read():
        rows = store._db.rows("SELECT term, term_id FROM search_terms WHERE kb_pk = ? "
                              "ORDER BY term", (kb_pk,))
        pairs = store._db.tuples("SELECT term, term_id FROM search_terms WHERE kb_pk = ? "
                                 "ORDER BY term", (kb_pk,))
        terms = [r["term"] for r in rows]
        ids = store._db.search.term_ids_known(kb_pk, terms + ["nowhere"])
        names = store._db.search.term_names(kb_pk, [r["term_id"] for r in rows] + [10 ** 6])
    assert len(rows) >= 6 and all(type(p) is tuple for p in pairs)
    assert pairs == [(r["term"], r["term_id"]) for r in rows]
    assert ids == {r["term"]: r["term_id"] for r in rows}  # "nowhere" has no ID
    assert names == {r["term_id"]: r["term"] for r in rows}
