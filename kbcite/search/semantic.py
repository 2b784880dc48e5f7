"""The semantic half of search: a vector for every published article, written in the
transaction of the version it embeds, and the nearest vectors to a query's, fused with the
lexical ranking.

A store's ``Semantic`` holds the model (``kbcite.search.embedding``), or None where the
``[semantic]`` extra is missing, its model failed to load, or the store was opened with
``semantic=False`` (the simulation's, so its tables never depend on what is installed). With
a model, every write of a published article stores its vector; without one, a write removes
the article's vector, so a stored vector is always of the current published version (the
articles written so are found lexically until ``kb reindex`` embeds them).

A search compares the query's vector with every vector of the knowledge base (brute force,
one matrix product: only published articles of the asked knowledge base have vectors, so
drafts, other knowledge bases and unpublished articles are never scored). The matrix is read
once and kept per process until the knowledge base's ``vectors_written`` moves. Fusion is
reciprocal rank fusion (``fuse``), under exact-title-first.
"""

import logging
import threading
from collections import OrderedDict
from typing import Any

from . import embedding

# Reciprocal rank fusion (Cormack, Clarke and Buettcher, 2009): an article's fused score is
# the sum of 1 / (RRF_K + its rank) over the two rankings; their 60. No weight is tuned, so
# nothing is fitted to the benchmark's collections.
RRF_K = 60

# Each ranking offers this many candidates to the fusion (at least the asked limit): an
# article 25th lexically and 2nd semantically can still make the top ten.
FUSION_DEPTH = 30

# A semantic candidate must be at least this close (cosine) to the query: below it, the
# nearest vectors of an unrelated query are noise, and the lexical ranking stands alone.
SIMILARITY_FLOOR = 0.2

# Brute force, exact up to EXACT_MAX vectors (a pass over 20,000 whole vectors reads 20 MB);
# past that in two passes: every vector's first COARSE_DIMENSIONS (the model is trained so
# that a prefix is itself an embedding: matryoshka, 64 one of its sizes) pick RERANKED
# candidates, compared whole. A pass over 100,000 whole vectors reads 100 MB and took 20-40 ms
# here; over their prefixes, a quarter of that. On the judged collections of
# bench/search_quality.py the two passes (64 dimensions, 600 candidates) found 100% (CISI)
# and 98.2% (CACM) of the exact pass's 30 nearest.
EXACT_MAX = 20000
COARSE_DIMENSIONS = 64
RERANKED = 1000

# Knowledge bases whose vector matrices a process keeps (768 bytes an article each: the
# prefixes as float32, the whole vectors as float16).
CACHED_KBS = 8

log = logging.getLogger("kbcite.search")

_said: set[str] = set()
_said_lock = threading.Lock()

# Matrices shared by every store of a process on one address, keyed (address, kb pk).
_matrices: OrderedDict[Any, Any] = OrderedDict()
_matrices_lock = threading.Lock()


def say_once(line):
    """Log the semantic half's status once per process."""
    with _said_lock:
        if line in _said:
            return
        _said.add(line)
    log.info("%s", line)


class Semantic:
    """A store's semantic half: its model or None, and the upkeep and search of its vectors.

    The model is loaded at the first write or search that needs it (once per process), so a
    command that does neither never pays for it."""

    def __init__(self, mode, address=None):
        self.mode = mode
        self._address = address if address not in (None, ":memory:") else id(self)

    @classmethod
    def opened(cls, requested=None, address=None):
        """The semantic half a store opened with ``semantic=requested`` has (True, False, a
        mode, or None for the environment's ``KBCITE_SEMANTIC``, else auto)."""
        return cls(embedding.mode(requested), address)

    @property
    def embedder(self):
        """The model, or None (off, or it did not load: said once in the log, why)."""
        if self.mode == "off":
            return None
        embedder, why = embedding.model()
        say_once(embedding.status_line(embedder, why))
        return embedder

    @property
    def why(self):
        """Why the half is off, or None where it is on."""
        if self.mode == "off":
            return "off (semantic=False or %s=off)" % embedding.MODE_VARIABLE
        return embedding.model()[1]

    @property
    def on(self):
        """Whether search is hybrid (loads the model, the first time)."""
        return self.embedder is not None

    @property
    def expected(self):
        """Whether search will be hybrid, told without loading the model (its files are
        there; it loads at the first search or write that needs it), and said once in the
        log: a server says at start which search it runs and need not load a 16 MB model
        for a process that may never search. A model that then fails to load leaves search
        lexical, and says so."""
        if self.mode == "off":
            return False
        if embedding.loaded():
            return self.on
        why = embedding.missing()
        say_once(embedding.status_line(None, why))
        return why is None

    # -- upkeep, in the caller's write transaction -----------------------------------------------

    def written(self, db, kb, pk, title, content, published, was_published):
        """After a write of one article: its vector for the new text, or none."""
        if published and self.on:
            self.added(db, kb, [(pk, title, content)])
        elif was_published and (kb.get("vectors_written") or self.on):
            # A knowledge base that never had a vector has none to remove.
            db.vectors.delete(kb["pk"], [pk])

    def added(self, db, kb, items):
        """After new published articles ``(pk, title, content)``: their vectors."""
        model = self.embedder if items else None
        if model is None:
            return
        vectors = model.embed([model.article_text(title, content) for _, title, content in items])
        db.vectors.put(kb["pk"], model.name, [(pk, model.pack(vector))
                                              for (pk, _, _), vector in zip(items, vectors)])

    def embed_all(self, db, kb):
        """Every published article's vector anew (``kb reindex``, an upgrade, a restore)."""
        db.vectors.clear(kb["pk"])
        if self.on:
            self.added(db, kb, [(row["pk"], row["title"], row["content"])
                                for row in db.articles.published_texts(kb["pk"])])

    # -- search ----------------------------------------------------------------------------------

    def nearest(self, db, kb, text, depth):
        """``[(pk, similarity)]``: the published articles nearest the query, closest first
        (ties by pk), at most ``depth``, none below ``SIMILARITY_FLOOR``."""
        model = self.embedder
        if model is None:
            return []
        pks, coarse, whole = self._matrix(db, kb, model)
        if not len(pks):
            return []
        np = model._np
        query = model.embed([text])[0]
        if not query.any():
            return []
        candidates = (np.arange(len(pks)) if len(pks) <= EXACT_MAX else
                      _top(np, _dot(np, coarse, query[:COARSE_DIMENSIONS]), RERANKED))
        scores = _dot(np, whole[candidates].astype(np.float32), query)
        chosen = candidates[_top(np, scores, depth)]
        scores = dict(zip(candidates.tolist(), scores.tolist()))
        best = sorted((-scores[i], int(pks[i])) for i in chosen.tolist())
        return [(pk, -negative) for negative, pk in best if -negative >= SIMILARITY_FLOOR]

    def _matrix(self, db, kb, model):
        # The knowledge base's vectors, read again only when its vectors_written moved; the
        # stamp and the rows come from the caller's one read transaction. (Its event head and
        # published count too: a store made anew at the same path starts its counters again.)
        key = (self._address, kb["pk"])
        stamp = (kb.get("vectors_written", 0), kb["head_sequence"], kb["published_count"])
        with _matrices_lock:
            held = _matrices.get(key)
            if held is not None and held[0] == stamp:
                _matrices.move_to_end(key)
                return held[1:]
        pks, blobs = db.vectors.of(kb["pk"], model.name)
        np = model._np
        pk_array = np.array(pks, dtype=np.int64)
        whole = model.unpack_many(blobs)
        coarse = np.ascontiguousarray(whole[:, :COARSE_DIMENSIONS])
        held = (stamp, pk_array, coarse, whole.astype(np.float16))
        with _matrices_lock:
            _matrices[key] = held
            _matrices.move_to_end(key)
            while len(_matrices) > CACHED_KBS:
                _matrices.popitem(last=False)
        return held[1:]


def _dot(np, matrix, vector):
    """``matrix @ vector`` in numpy's own loop, on this thread: BLAS's threads, on a busy
    machine, wait for a core (10,000 articles: the nearest vectors took 12.5 ms at the median
    through OpenBLAS's two threads, 1.2 ms through one; 100,000 prefixes, 8-11 ms here
    either way, 15-23 ms through two threads)."""
    return np.einsum("ij,j->i", matrix, vector)


def _top(np, scores, count):
    """The indices of the ``count`` highest ``scores`` (all of them, if fewer), unordered."""
    if count >= len(scores):
        return np.arange(len(scores))
    return np.argpartition(-scores, count - 1)[:count]


def fuse(lexical, named, nearest, limit):
    """``[(pk, match)]``: the top ``limit`` of reciprocal rank fusion of the lexical ranking
    (pks, best first) and the semantic one (``nearest``'s pairs), each hit's ``match``
    ``"lexical"``, ``"semantic"`` or ``"both"``.

    The lexical ranking's exact-title hits (``named``, its first ones) stay first, in its
    order; the rest by fused score, ties by the lexical rank, then by pk.
    """
    semantic = [pk for pk, _ in nearest]
    lex_rank = {pk: i for i, pk in enumerate(lexical)}
    sem_rank = {pk: i for i, pk in enumerate(semantic)}
    named = [pk for pk in lexical if pk in set(named)]
    scores: dict[int, float] = {}
    for ranks in (lex_rank, sem_rank):
        for pk, rank in ranks.items():
            scores[pk] = scores.get(pk, 0.0) + 1.0 / (RRF_K + rank + 1)
    rest = sorted((pk for pk in scores if pk not in set(named)),
                  key=lambda pk: (-scores[pk], lex_rank.get(pk, len(lexical)), pk))
    order = (named + rest)[:limit]
    return [(pk, "both" if pk in lex_rank and pk in sem_rank else
             "lexical" if pk in lex_rank else "semantic") for pk in order]
