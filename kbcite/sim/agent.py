"""The scripted agent: it answers questions and checks its old citations through the store's
tools alone (``call_tool``), as an agent on the MCP server would.
"""

from ..errors import NotFound
from .model import CITATIONS_PER_ANSWER, KB_ID, TITLE_LOOKUP_HITS, Citation


class Agent:
    """The scripted agent: it touches the knowledge base only through ``call_tool``."""

    def __init__(self, store):
        self.store = store
        self.granted = frozenset([KB_ID])
        self.citations = []
        self.answers = []
        self.read_content = {}
        self.cursor = None
        self.cost = {name: {"calls": 0, "articles_read": 0, "bytes_read": 0, "events": 0}
                     for name in ("title_only", "reread", "poll")}
        self.cost["poll"]["pages"] = 0
        self.poll_status = {}  # the poll strategy's view of each distinct citation

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
        cited = []
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
        return {c.key: _status(c, current[c.article_id]) for c in self.citations}

    def check_poll(self):
        """Resume the event log from the cursor; re-read only cited articles that changed."""
        cost = self.cost["poll"]
        changed, more = set(), True
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
        status = self.poll_status
        cited = {}
        for citation in self.citations:
            cited.setdefault(citation.article_id, []).append(citation)
        for article_id in sorted(changed):
            if article_id in cited:
                article = self._read_counted(article_id, cost)
                for citation in cited[article_id]:
                    status[citation.key] = _status(citation, article)
        return dict(status)

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
