"""Search: tokens, BM25F ranking, the tiers of index queries, snippets, and the index's upkeep.

``text`` cuts text into tokens; ``ranking`` scores an article for a query; ``query`` writes the
boolean queries the engines' indexes answer; ``tiers`` gathers the candidates in bounded work;
``snippets`` cuts the window shown with a hit; ``index`` keeps the search statistics in line
with the published articles; ``hits`` is the search tool itself. docs/search.md states the
order of results exactly.
"""
