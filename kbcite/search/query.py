"""The boolean queries the full-text indexes answer: every term, or every term but one.

Written once as a tree (``query_tree``) and rendered in each engine's syntax
(``render_query``): FTS5's ``AND``/``OR`` on SQLite, tsquery's ``&``/``|`` on PostgreSQL.
"""

def query_tree(terms, spare=0):
    """The boolean query for articles holding every term but at most ``spare`` (0 or 1):
    a term, or ``("and" | "or", [subqueries])``.

    All but one is written without NOT and without a query per left-out term: an article
    that misses at most one term holds every term of one half of them and all but at most
    one of the other half. Each term's list of articles is then walked about log2(number of
    terms) times, where one query per left-out term walks it once per term of the query.
    """
    terms = list(terms)
    if not spare:
        return ("and", terms)
    if len(terms) < 2:
        raise ValueError("all terms but one of %d term(s) is every article" % len(terms))
    if len(terms) == 2:
        return ("or", terms)
    half = (len(terms) + 1) // 2
    branches = []
    for whole, other in ((terms[:half], terms[half:]), (terms[half:], terms[:half])):
        branches.append(("and", whole + ([query_tree(other, 1)] if len(other) > 1 else [])))
    return ("or", branches)


def render_query(tree, leaf, and_op, or_op):
    """``query_tree``'s query as text: ``leaf(term)`` for each term, the operators between,
    parentheses around every group of more than one."""
    if isinstance(tree, str):
        return leaf(tree)
    op, children = tree
    parts = [render_query(child, leaf, and_op, or_op) for child in children]
    if len(parts) == 1:
        return parts[0]
    return "(%s)" % (and_op if op == "and" else or_op).join(parts)
