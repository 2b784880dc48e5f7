"""The embedding model of the ``[semantic]`` extra: wordllama's bundled 256-dimension model,
read from the installed package's own files, and never anything from the network.

wordllama's loader looks for the bundled tokenizer under ``tokenizer/`` where its wheel has
``tokenizers/``, then asks a model hub for it; so the files are opened here directly: the
tokenizer (a ``tokenizers`` JSON) and the weights (``safetensors``, one 32,000 x 256 float16
matrix). An article's vector is the mean of its tokens' rows, normalised to unit length
(wordllama's own ``embed``), and is stored as a float32 scale and 256 int8s (260 bytes).

``model()`` loads it once per process, or returns None with the reason (the extra is not
installed, its files are missing or damaged): search then stays lexical.
"""

import importlib.util
import os
import struct
import threading
from itertools import chain
from pathlib import Path
from typing import Any

# wordllama's bundled model: its files inside the installed package, and the name stored with
# every vector (a vector of another model is never compared with this one's).
PACKAGE = "wordllama"
TOKENIZER_FILE = Path("tokenizers", "l2_supercat_tokenizer_config.json")
WEIGHTS_FILE = Path("weights", "l2_supercat_256.safetensors")
WEIGHTS_KEY = "embedding.weight"
MODEL_NAME = "wordllama-l2_supercat-256/int8"
DIMENSIONS = 256

# What is embedded of an article: its title and the start of its content. A mean of token
# vectors is dominated by the topic words early on; a bound keeps a write's cost bounded
# whatever the article's size (about 0.7 microseconds a character to tokenize, cold).
EMBED_CHARS = 4000

# Words already tokenized, kept up to this many: a knowledge base repeats its vocabulary, and
# a word's tokens never depend on its neighbours (the tokenizer splits at spaces), so most
# words of a write are looked up, not tokenized.
WORD_CACHE_MAX = 200000

# What to install for the semantic half, named in the line said when it is missing.
EXTRA = 'pip install "kbcite[semantic]"'

# The environment's say: KBCITE_SEMANTIC=off keeps a process lexical even with the extra.
MODE_VARIABLE = "KBCITE_SEMANTIC"
MODES = ("auto", "on", "off")


class Embedder:
    """Texts to unit vectors with the bundled model (``embed``), and vectors to bytes and back."""

    name = MODEL_NAME

    def __init__(self, tokenizer, weights):
        import numpy
        self._np = numpy
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer
        self._weights = numpy.ascontiguousarray(weights, dtype=numpy.float32)
        self._words = {}
        self._lock = threading.Lock()

    @classmethod
    def from_files(cls, root):
        """The model whose files are under ``root`` (the installed package's folder)."""
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
        root = Path(root)
        tokenizer = Tokenizer.from_file(str(root / TOKENIZER_FILE))
        weights = load_file(str(root / WEIGHTS_FILE))[WEIGHTS_KEY]
        if weights.shape[1] != DIMENSIONS:
            raise ValueError("%s holds %d dimensions, not %d"
                             % (WEIGHTS_FILE, weights.shape[1], DIMENSIONS))
        return cls(tokenizer, weights)

    def token_ids(self, text):
        """The tokenizer's ids of ``text``, a word at a time (whitespace itself dropped)."""
        words = text.split()
        with self._lock:
            cache = self._words
            missing = sorted(set(words).difference(cache))
            if missing:
                if len(cache) + len(missing) > WORD_CACHE_MAX:
                    cache.clear()
                for word, encoding in zip(missing, self._tokenizer.encode_batch(
                        missing, add_special_tokens=False)):
                    cache[word] = encoding.ids
            return list(chain.from_iterable(map(cache.__getitem__, words)))

    def embed(self, texts):
        """A float32 matrix of one unit vector a text (a zero row for a text of no tokens):
        the mean of its tokens' rows, normalised."""
        np = self._np
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        weights = self._weights
        for i, text in enumerate(texts):
            ids = self.token_ids(text)
            if ids:
                # The sum has the mean's direction: normalised, they are one vector.
                out[i] = weights[ids].sum(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=out, where=norms > 0)

    def article_text(self, title, content):
        """What is embedded of an article: its title, then the start of its content."""
        return "%s\n%s" % (title, content[:EMBED_CHARS])

    def pack(self, vector):
        """A unit vector as 260 bytes: a float32 scale, then 256 int8s."""
        np = self._np
        scale = float(np.abs(vector).max()) / 127.0
        if scale == 0.0:
            return struct.pack("<f", 0.0) + bytes(DIMENSIONS)
        quantized = np.round(vector / scale).astype(np.int8)
        return struct.pack("<f", scale) + quantized.tobytes()

    def unpack_many(self, blobs):
        """A float32 matrix of packed vectors (``pack``'s bytes), one row each."""
        np = self._np
        if not blobs:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        raw = np.frombuffer(b"".join(bytes(b) for b in blobs), dtype=np.uint8)
        raw = raw.reshape(len(blobs), 4 + DIMENSIONS)
        scales = raw[:, :4].copy().view("<f4").astype(np.float32)
        values = raw[:, 4:].view(np.int8).astype(np.float32)
        return values * scales


_loaded: dict[str, Any] = {}
_load_lock = threading.Lock()


def package_root():
    """The installed wordllama package's folder, found without importing it (its import
    sets up the root logger), or None."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def mode(requested=None):
    """The semantic mode asked for: ``requested`` if given (True/False/a mode), else the
    environment's ``KBCITE_SEMANTIC``, else ``auto``."""
    if requested is True:
        return "on"
    if requested is False:
        return "off"
    value = requested if requested is not None else os.environ.get(MODE_VARIABLE, "auto")
    value = str(value).strip().lower() or "auto"
    if value not in MODES:
        raise ValueError("%s must be one of %s, not %r" % (MODE_VARIABLE, ", ".join(MODES),
                                                           value))
    return value


def missing():
    """Why the model cannot load, found without loading it (the extra not installed, its
    files absent), or None where its files are all there: what a process says at start."""
    root = package_root()
    if root is None:
        return "the semantic half is not installed (%s)" % EXTRA
    absent = [str(name) for name in (TOKENIZER_FILE, WEIGHTS_FILE) if not (root / name).is_file()]
    if absent:
        return "the semantic model's files are missing (%s); reinstall with %s" % (
            ", ".join(absent), EXTRA)
    return None


def loaded():
    """Whether ``model()`` has run in this process (loaded, or failed to)."""
    with _load_lock:
        return "result" in _loaded


def model():
    """``(Embedder, None)`` loaded once per process, or ``(None, why not)``."""
    with _load_lock:
        if "result" not in _loaded:
            _loaded["result"] = _load()
        return _loaded["result"]


def _load():
    try:
        why = missing()
        if why is not None:  # the reason a process said at start, said again the same way
            return None, why
        root = package_root()
        # The tokenizers library would start threads of its own for a batch; one is enough
        # for a handful of words, and the server has its own threads.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        return Embedder.from_files(root), None
    except (OSError, ValueError, KeyError, ImportError, RuntimeError, EOFError) as exc:
        # a missing file, a damaged one, a library that will not load
        return None, "the semantic model did not load (%s: %s); reinstall with %s" % (
            type(exc).__name__, str(exc)[:200], EXTRA)


def status_line(embedder, why, name=MODEL_NAME):
    """The one line a process says about its search: hybrid where ``embedder`` is loaded (or,
    at start, where nothing is ``why`` it cannot load), else lexical only and why."""
    if embedder is not None or why is None:
        return "search: hybrid (lexical and semantic, model %s)" % (
            embedder.name if embedder is not None else name)
    return "search: lexical only: %s" % why
