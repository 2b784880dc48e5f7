"""The lists: the person's knowledge bases, one knowledge base's articles, its search."""

from ....errors import InvalidArgument
from ....limits import SEARCH_LIMIT_MAX

# Articles a page of a knowledge base's list shows.
PAGE_SIZE = 50


def home(page):
    """``/``: the knowledge bases the person's token grants (those that exist)."""
    with page.reading() as store:
        rows = [row for row in store.list_knowledge_bases()
                if row["knowledge_base_id"] in page.person.grants]
    rows.sort(key=lambda row: row["knowledge_base_id"])
    return page.render("home.html", knowledge_bases=rows)


def _page_number(page):
    try:
        number = int(page.arg("page", "1"))
    except ValueError:
        return 1
    return max(1, number)


def knowledge_base(page):
    """``/kb/{kb}``: its published articles, newest change first, a page at a time."""
    kb_id = page.params["kb"]
    number = _page_number(page)
    with page.reading() as store:
        rows, total = store.list_recent(kb_id, granted=page.person.grants,
                                        offset=(number - 1) * PAGE_SIZE, limit=PAGE_SIZE)
        pages = max(1, (total + PAGE_SIZE - 1) // PAGE_SIZE)
        if number > pages:  # past the end: the last page
            number = pages
            rows, total = store.list_recent(kb_id, granted=page.person.grants,
                                            offset=(number - 1) * PAGE_SIZE, limit=PAGE_SIZE)
    return page.render("knowledge_base.html", kb=kb_id, articles=rows, number=number,
                       pages=pages, total=total)


def search(page):
    """``/kb/{kb}/search?q=``: the search tool's own hits, in its order."""
    kb_id = page.params["kb"]
    query = page.arg("q", "")
    hits, problem = [], None
    if query.strip():
        try:
            with page.reading() as store:
                result = store.call_tool("search_knowledge_base",
                                         {"knowledge_base_id": kb_id, "query": query,
                                          "limit": SEARCH_LIMIT_MAX},
                                         granted=page.person.grants)
            hits = result["results"]
        except InvalidArgument as exc:
            if exc.details.get("argument") != "query":
                raise
            problem = exc.message
    return page.render("search.html", kb=kb_id, query=query, hits=hits, problem=problem)
