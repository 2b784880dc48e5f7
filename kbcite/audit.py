"""The audit: every invariant the store keeps, checked against the stored data.

What the database's own check reports; for each knowledge base, a gapless event log, each
published article's last event naming its version (a draft's, none but an unpublish), the
published count, and the search statistics and both indexes matching the published articles.
The history: each article's last version is the article as it stands, every text a version
or an article names exists, each version's event is the one the log holds for it, each
event since the article's history began has its version, and every version is within the
limits of a text and a title. Proposals: every approved one has
its version, every one its events (``kbcite.proposals.audit``).
Each finding is one line naming the knowledge base; none means consistent.
"""

from dataclasses import dataclass

from . import proposals, validation
from .limits import EVENT_DELETED, EVENT_UNPUBLISHED, PROPOSAL_EVENTS, TITLE_MAX
from .search.ranking import SearchDoc, presence_totals


def audit(db):
    """Problems found in the stored data (an empty list when all is consistent)."""
    with db.read():
        problems = db.integrity_problems()
        for kb in db.audit.kbs():
            problems += audit_kb(db, kb)
            problems += audit_history(db, kb)
    return problems


def audit_history(db, kb):
    """Problems of a knowledge base's history, against its articles, texts and event log."""
    name, problems = kb["kb_id"], []
    versions, articles, texts, events = db.audit.history(kb["pk"])
    last = {}
    ids = {a["pk"]: a["article_id"] for a in articles}
    for version in versions:
        last[version["article_pk"]] = version
        if version["text_pk"] is not None and version["text_pk"] not in texts:
            problems.append("knowledge base %r: version %s names a missing text"
                            % (name, version["updated_at"]))
        problems += past_limits(name, ids.get(version["article_pk"]), version)
        if version["sequence"] is not None:
            event = events.get(version["sequence"])
            if event is None or (event["type"], event["updated_at"]) != (
                    version["event"], version["updated_at"]):
                problems.append("knowledge base %r: version %s says event %d, the log holds %s"
                                % (name, version["updated_at"], version["sequence"], event))
    # Every event after an article's history began has its version: a change and its version
    # commit together or not at all. (An upgraded store's history begins at the upgrade.)
    first: dict[int, str] = {}
    logged = {v["sequence"] for v in versions if v["sequence"] is not None}
    for version in versions:
        first.setdefault(version["article_pk"], version["updated_at"])
    began = {a["article_id"]: first.get(a["pk"]) for a in articles}
    for sequence, event in sorted(events.items()):
        if event["type"] in PROPOSAL_EVENTS:
            continue  # a proposal's events are checked against the proposals
        start = began.get(event["article_id"])
        if start is not None and event["updated_at"] > start and sequence not in logged:
            problems.append("knowledge base %r: event %d (%s of %r) has no version in the "
                            "history" % (name, sequence, event["type"], event["article_id"]))
    for article in articles:
        version = last.get(article["pk"])
        if article["text_pk"] not in texts:
            problems.append("article %r of %r names a missing text" % (article["article_id"],
                                                                      name))
        if version is None or (version["version_us"], version["title"], version["text_pk"],
                               version["published"]) != (
                article["version_us"], article["title"], article["text_pk"],
                article["published"]):
            problems.append("article %r of %r: its last version in the history is not the "
                            "article as it stands" % (article["article_id"], name))
    return problems + proposals.audit(db, kb, versions, events)


def past_limits(name, article_id, version):
    """A version whose text or title is past the limits every write checks (written by a
    path that did not check them, or under a larger limit): each a line saying what to do."""
    found = []
    if version["text_pk"] is not None and version["bytes"] > validation.CONTENT_MAX_BYTES:
        found.append("article %r of %r: version %s holds %d bytes of text, past the limit of "
                     "%d; edit the article shorter, then drop the old text with kb history "
                     "prune" % (article_id, name, version["updated_at"], version["bytes"],
                                validation.CONTENT_MAX_BYTES))
    if len(version["title"]) > TITLE_MAX:
        found.append("article %r of %r: version %s has a title of %d characters, past the "
                     "limit of %d; give it a shorter one" % (
                         article_id, name, version["updated_at"], len(version["title"]),
                         TITLE_MAX))
    return found


@dataclass
class KnowledgeBaseState:
    """What one knowledge base's invariants are checked against, read once: its stored
    articles, their last events, the published ones' pks, and its search statistics (each
    stored row parsed)."""

    kb: dict
    articles: list
    last: dict
    published: list
    docs: list
    parsed: list
    titles: list
    terms: dict

    @property
    def name(self) -> str:
        return self.kb["kb_id"]


def _state(db, kb, problems):
    """Read a knowledge base's state for its checks (a search row that cannot be read is a
    problem, and is checked as an empty one)."""
    stored = db.audit.articles(kb["pk"])
    docs, titles, terms, names = db.audit.search(kb["pk"])
    parsed = []
    for d in docs:
        try:
            parsed.append(SearchDoc.stored(d, names))
        except (KeyError, ValueError) as exc:
            problems.append("knowledge base %r: the search statistics of article pk %d cannot "
                            "be read (%s: %s)" % (kb["kb_id"], d["pk"], type(exc).__name__, exc))
            parsed.append(SearchDoc(tuple(d["title_terms"].split()), {}, d["title_len"],
                                    d["body_len"]))
    return KnowledgeBaseState(kb, stored, db.audit.last_events(kb["pk"]),
                              [art["pk"] for art in stored if art["published"]], docs, parsed,
                              titles, terms)


def gapless_log(db, st):
    """The event log holds every sequence from 1 to the head, and nothing beyond it."""
    head = st.kb["head_sequence"]
    seqs = db.audit.sequences(st.kb["pk"])
    if seqs == list(range(1, head + 1)):
        return []
    missing = sorted(set(range(1, head + 1)) - set(seqs))
    extra = [s for s in seqs if not 1 <= s <= head]
    return ["knowledge base %r: event log damaged: head %d, missing sequence(s) %s%s"
            % (st.name, head, ", ".join(map(str, missing[:10])) or "none",
               "; beyond the head: %s" % ", ".join(map(str, extra[:10])) if extra else "")]


def last_events(db, st):
    """Each article's last event is what agents last saw of it: a published one's its
    version, a draft's none but an unpublish, a deleted one's a withdrawal."""
    problems = []
    present = {art["article_id"] for art in st.articles}
    for article_id, ev in sorted(st.last.items()):
        # An article no longer stored was deleted: agents last saw it withdrawn or deleted.
        if article_id not in present and ev["type"] not in (EVENT_DELETED, EVENT_UNPUBLISHED):
            problems.append("article %r of %r is gone from the store, but its last event is %s"
                            % (article_id, st.name, ev["type"]))
    for art in st.articles:
        ev = st.last.get(art["article_id"])
        if art["published"]:
            if ev is None or ev["updated_at"] != art["updated_at"] or \
                    ev["type"] in (EVENT_UNPUBLISHED, EVENT_DELETED):
                problems.append("article %r of %r: updated_at %s but last event %s"
                                % (art["article_id"], st.name, art["updated_at"], ev))
        elif ev is not None and ev["type"] != EVENT_UNPUBLISHED:
            problems.append("draft %r of %r: last event is %s"
                            % (art["article_id"], st.name, ev["type"]))
    return problems


def published_count(db, st):
    """The knowledge base's count of published articles is theirs."""
    if st.kb["published_count"] == len(st.published):
        return []
    return ["knowledge base %r: counts %d published, holds %d"
            % (st.name, st.kb["published_count"], len(st.published))]


def search_statistics(db, st):
    """The search statistics are the published articles', their token totals and title terms
    theirs."""
    problems = []
    if [d["pk"] for d in st.docs] != st.published:
        problems.append("knowledge base %r: search statistics for %d articles, %d published"
                        % (st.name, len(st.docs), len(st.published)))
    if (sum(d.title_len for d in st.parsed), sum(d.body_len for d in st.parsed)) != \
            (st.kb["title_tokens"], st.kb["body_tokens"]):
        problems.append("knowledge base %r: token totals differ from its articles'" % st.name)
    expected_titles = sorted((row["pk"], term, d.title_len)
                             for row, d in zip(st.docs, st.parsed)
                             for term in set(d.title_tokens))
    if sorted((t["pk"], t["term"], t["title_len"]) for t in st.titles) != expected_titles:
        problems.append("knowledge base %r: title terms differ from its articles'" % st.name)
    return problems


def indexes(db, st):
    """The full-text indexes hold the published articles that have words (an article
    without a single word, a title of "!!!", has nothing an index could find it by)."""
    problems = []
    worded = [d["pk"] for d, doc in zip(st.docs, st.parsed)
              if doc.title_tokens or doc.body_counts]
    indexed = db.indexed_pks(st.kb["pk"])
    if indexed != worded:
        problems.append("knowledge base %r: %d indexed, %d published with words to index"
                        % (st.name, len(indexed), len(worded)))
    titled = [d["pk"] for d, doc in zip(st.docs, st.parsed) if doc.title_tokens]
    if db.title_indexed_pks(st.kb["pk"]) != titled:
        problems.append("knowledge base %r: the index of titles differs from its articles' "
                        "titles" % st.name)
    return problems


def term_counts(db, st):
    """Each term's article counts (BM25's document frequencies) are the articles' own."""
    expected = presence_totals(st.parsed)
    if st.terms == expected:
        return []
    wrong = sorted(set(st.terms.items()) ^ set(expected.items()))[:3]
    return ["knowledge base %r: term counts differ from its articles' (%s)" % (st.name, wrong)]


def vectors(db, st):
    """A vector is of a published article's current version, or there is none (the semantic
    half: an article written without the model is found lexically until kb reindex)."""
    stray = sorted(set(db.vectors.pks(st.kb["pk"])) - set(st.published))
    if not stray:
        return []
    return ["knowledge base %r: %d vector(s) of articles not published (pk %s); kb reindex %s "
            "embeds it anew" % (st.name, len(stray), stray[0], st.name)]


# The invariants of a knowledge base, each a function of the engine and its state, in the
# order their findings are listed.
KB_CHECKS = (gapless_log, last_events, published_count, search_statistics, indexes,
             term_counts, vectors)


def audit_kb(db, kb):
    """Problems of one knowledge base: its event log, its articles' last events, its counts,
    its search statistics and indexes (``KB_CHECKS``)."""
    problems: list[str] = []
    st = _state(db, kb, problems)
    for check in KB_CHECKS:
        problems += check(db, st)
    return problems
