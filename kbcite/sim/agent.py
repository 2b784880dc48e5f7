"""The scripted agent: it answers questions and checks its old citations through the store's
tools alone (``call_tool``), as an agent on the MCP server would.
"""

from typing import Any

from ..errors import NotFound
from ..limits import CITATIONS_MAX
from .model import CITATIONS_PER_ANSWER, KB_ID, TITLE_LOOKUP_HITS, Citation
from .passages import change_bytes, locate, verdict_of_check, verdict_of_read

# The ways of finding out whether a stale citation's passage still stands, and what each costs:
# re-read every cited article and compare (the re-read check's own reads), check_citations on
# every distinct citation, poll and then check_citations only the citations of the articles
# the poll names, and poll and re-read those (the poll check's own reads).
PASSAGE_STRATEGIES = ("reread", "check_all", "poll_check", "poll_reread")


class Agent:
    """The scripted agent: it touches the knowledge base only through ``call_tool``."""

    def __init__(self, store, passages=True):
        self.store = store
        self.find_passages = passages  # the edit trial's agent never checks its citations
        self.granted = frozenset([KB_ID])
        self.citations = []
        self.answers = []
        self.read_content = {}
        self.cursor = None
        self.cost = {name: {"calls": 0, "articles_read": 0, "bytes_read": 0, "events": 0}
                     for name in ("title_only", "reread", "poll")}
        self.cost["poll"]["pages"] = 0
        self.poll_status = {}  # the poll strategy's view of each distinct citation
        # Per citation: the passage its answer relied on and the content it was found in.
        self.passages, self.cited_content = [], []
        # Per strategy, each citation's verdict (passages.VERDICTS) as that strategy last saw it.
        self.verdicts: dict[str, list[Any]] = {name: [] for name in PASSAGE_STRATEGIES}
        self.polled = set()  # the article IDs the last poll named
        # What check_citations costs the two strategies that call it; the other two cost what
        # the re-read and the poll checks cost.
        self.passage_cost = {name: {"check_calls": 0, "citations_sent": 0, "reads": 0,
                                    "bytes_read": 0}
                             for name in ("check_all", "poll_check")}

    def call(self, name, **arguments):
        """One tool call on the granted knowledge base."""
        return self.store.call_tool(name, arguments, granted=self.granted)

    def search(self, query, limit=None):
        """search_knowledge_base; returns its result."""
        args = {"knowledge_base_id": KB_ID, "query": query}
        if limit is not None:
            args["limit"] = limit
        return self.call("search_knowledge_base", **args)

    def read(self, article_id):
        """read_knowledge_article; returns its result, or ``None`` if the article is gone."""
        try:
            return self.call("read_knowledge_article", knowledge_base_id=KB_ID,
                             article_id=article_id)
        except NotFound:
            return None

    def answer(self, question_text):
        """Search, read the top two hits, keep both citations; returns the answer's index."""
        index = len(self.answers)
        found = self.search(question_text, CITATIONS_PER_ANSWER)
        cited: list[Any] = []
        for hit in found["results"][:CITATIONS_PER_ANSWER]:
            article = self.read(hit["article_id"])
            if article is None:
                continue
            if self.cursor is None:
                # The agent keeps the log's head from its first read as its polling cursor.
                self.cursor = article["head_sequence"]
            citation = Citation(index, article["article_id"], article["updated_at"],
                                article["title"])
            self.read_content[(index, len(cited))] = article["content"]
            self.poll_status.setdefault(citation.key, "fresh")
            # The passage from the snippet this hit showed, if it showed the version just read.
            self.passages.append(locate(hit["snippet"], article["content"])
                                 if self.find_passages
                                 and hit["updated_at"] == article["updated_at"] else None)
            self.cited_content.append(article["content"])
            for verdicts in self.verdicts.values():
                verdicts.append("fresh")
            cited.append(len(self.citations))
            self.citations.append(citation)
        self.answers.append(cited)
        return index

    # The three ways of checking old citations. Each returns {distinct citation: status}.

    def check_title_only(self):
        """Look every cited title up again; a citation is stale when its title is not found."""
        cost = self.cost["title_only"]
        found_titles = {}
        for citation in self.citations:
            title = citation.title
            if title in found_titles:
                continue
            result = self.search(title, TITLE_LOOKUP_HITS)
            cost["calls"] += 1
            cost["bytes_read"] += sum(_utf8(h["title"]) + _utf8(h["snippet"])
                                      for h in result["results"])
            found_titles[title] = any(h["title"] == title for h in result["results"])
        return {c.key: "fresh" if found_titles[c.title] else "stale" for c in self.citations}

    def check_reread(self):
        """Re-read every distinct cited article by ID and compare versions."""
        cost = self.cost["reread"]
        current = {}
        for citation in self.citations:
            if citation.article_id not in current:
                current[citation.article_id] = self._read_counted(citation.article_id, cost)
        verdicts = self.verdicts["reread"]
        for i, citation in enumerate(self.citations):
            verdicts[i] = self._verdict_of_read(i, current[citation.article_id])
        return {c.key: _status(c, current[c.article_id]) for c in self.citations}

    def check_poll(self):
        """Resume the event log from the cursor; re-read only cited articles that changed."""
        cost = self.cost["poll"]
        changed: set[str] = set()
        more = True
        if self.cursor is None:
            return {}
        while more:
            page = self.call("poll_resource_events", resource_type="knowledge_base",
                             resource_id=KB_ID, after_sequence=self.cursor)
            cost["calls"] += 1
            cost["pages"] += 1
            cost["events"] += len(page["events"])
            changed.update(event["article_id"] for event in page["events"])
            self.cursor, more = page["next_after_sequence"], page["has_more"]
        self.polled = changed
        status, verdicts = self.poll_status, self.verdicts["poll_reread"]
        cited = self._by_article()
        for article_id in sorted(changed):
            if article_id in cited:
                article = self._read_counted(article_id, cost)
                for i in cited[article_id]:
                    status[self.citations[i].key] = _status(self.citations[i], article)
                    verdicts[i] = self._verdict_of_read(i, article)
        return dict(status)

    # Whether a stale citation's passage still stands, by check_citations. Each fills its
    # strategy's verdicts (the re-read and the poll checks fill theirs from their own reads).

    def check_citations_all(self):
        """check_citations on every distinct citation, a hundred a call."""
        self._check_citations(range(len(self.citations)), "check_all")

    def check_citations_polled(self):
        """check_citations on the citations of the articles the last poll named."""
        cited = self._by_article()
        self._check_citations([i for article_id in sorted(self.polled)
                               for i in cited.get(article_id, ())], "poll_check")

    def _check_citations(self, indices, strategy):
        cost, verdicts = self.passage_cost[strategy], self.verdicts[strategy]
        by_key: dict[Any, list[int]] = {}
        for i in indices:
            by_key.setdefault(self.citations[i].key, []).append(i)
        keys = list(by_key)
        for start in range(0, len(keys), CITATIONS_MAX):
            batch = keys[start:start + CITATIONS_MAX]
            found = self.call("check_citations", knowledge_base_id=KB_ID, citations=[
                {"knowledge_base_id": kb, "article_id": a, "updated_at": v} for kb, a, v in batch])
            cost["check_calls"] += 1
            cost["citations_sent"] += len(batch)
            for key, result in zip(batch, found["results"]):
                cost["bytes_read"] += change_bytes(result["changes"])
                for i in by_key[key]:
                    verdict = verdict_of_check(self.passages[i], self.cited_content[i], result)
                    if verdict is None:  # no change to replay: read the article instead
                        article = self.read(self.citations[i].article_id)
                        cost["reads"] += 1
                        if article is not None:
                            cost["bytes_read"] += (_utf8(article["title"])
                                                   + _utf8(article["content"]))
                        verdict = self._verdict_of_read(i, article)
                    verdicts[i] = verdict

    def passage_costs(self, ways=PASSAGE_STRATEGIES):
        """What each of ``ways`` of finding out about passages cost so far: tool calls, of
        which check_citations calls, citations sent, articles read and bytes of article text."""
        out = {}
        for name, base in (("reread", "reread"), ("poll_reread", "poll")):
            c = self.cost[base]
            out[name] = {"calls": c["calls"], "check_calls": 0, "citations_sent": 0,
                         "articles_read": c["articles_read"], "bytes_read": c["bytes_read"]}
        for name in ("check_all", "poll_check"):
            c = self.passage_cost[name]
            # The poll's pages are the second's calls too: the poll check made them once.
            pages = self.cost["poll"]["pages"] if name == "poll_check" else 0
            out[name] = {"calls": pages + c["check_calls"] + c["reads"],
                         "check_calls": c["check_calls"], "citations_sent": c["citations_sent"],
                         "articles_read": c["reads"], "bytes_read": c["bytes_read"]}
        return {name: out[name] for name in ways}

    def _verdict_of_read(self, i, article):
        return verdict_of_read(self.citations[i], self.passages[i], article)

    def _by_article(self):
        """``{article ID: indices of its citations}``."""
        cited: dict[str, list[int]] = {}
        for i, citation in enumerate(self.citations):
            cited.setdefault(citation.article_id, []).append(i)
        return cited

    def _read_counted(self, article_id, cost):
        article = self.read(article_id)
        cost["calls"] += 1
        if article is not None:
            cost["articles_read"] += 1
            cost["bytes_read"] += _utf8(article["title"]) + _utf8(article["content"])
        return article


def _utf8(text):
    return len(text.encode("utf-8"))


def _status(citation, article):
    """``fresh``, ``changed`` or ``gone``: a citation against the article as now read."""
    if article is None:
        return "gone"
    return "fresh" if article["updated_at"] == citation.updated_at else "changed"
