"""What the completion scripts ask ``kb`` at a TAB: ``kb __complete WORD... CURRENT`` prints
the knowledge-base or article IDs that fit the word being typed, one ``ID<TAB>title`` a line;
and ``kb completion SHELL --install``, which writes the script where the shell looks for it.

The IDs come from the store the command line names (``--db``, else ``$KB_DB``), read in one
read transaction that takes no write lock, at most ``CANDIDATES_MAX`` of them. A TAB must
never print an error into the person's command line: anything that goes wrong offers nothing.
"""

import argparse
import os
import tempfile

from ..engines import open_engine
from .messages import PROG

# IDs offered at most: a screenful for a person; a prefix narrows the rest.
CANDIDATES_MAX = 100

# How long a TAB may wait for a store that is busy: a completion never keeps a person waiting.
TIMEOUT_S = 0.5

# The positional arguments (by metavar) and the options whose values are IDs.
KB_SLOTS, ARTICLE_SLOTS = ("KB",), ("ARTICLE",)
KB_OPTIONS = ("--kb", "--grant")

# A title shown beside an ID is cut to this many characters.
TITLE_SHOWN = 60

# In the first two lines of every script kb writes: install knows its own earlier ones by it.
MARKER = "completion for kb"


class InstallRefused(Exception):
    """An install that would overwrite another file."""


def _subparsers(parser):
    """The ``{name: parser}`` of a parser's subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def _takes_value(parser, word):
    """Whether option ``word`` of ``parser`` is followed by a value."""
    for action in parser._actions:
        if word in action.option_strings:
            return action.nargs != 0
    return False


def slot(parser, words):
    """``(kind, knowledge base)`` the last of ``words`` fills: kind ``"kb"``, ``"article"`` or
    None; the knowledge base is the one an article belongs to (its KB argument or --kb)."""
    words = _joined(words)
    before, current = words[:-1], words[-1] if words else ""
    if current.startswith("-"):
        return None, None
    positionals: list[str] = []
    kb, i = None, 0
    while i < len(before):
        word = before[i]
        if word.startswith("-"):
            if word.split("=", 1)[0] in KB_OPTIONS and "=" not in word and i + 1 < len(before):
                kb = before[i + 1]
            if "=" not in word and _takes_value(parser, word):
                i += 1
        else:
            sub = _subparsers(parser)
            if word in sub and not positionals:
                parser = sub[word]
            else:
                positionals.append(word)
        i += 1
    if before and before[-1] in KB_OPTIONS:
        return "kb", None
    if before and before[-1].startswith("-") and _takes_value(parser, before[-1]):
        return None, None
    arguments = [a for a in parser._actions if not a.option_strings
                 and not isinstance(a, argparse._SubParsersAction)]
    for action, value in zip(arguments, positionals):
        if action.metavar in KB_SLOTS:
            kb = value
    if len(positionals) >= len(arguments):
        return None, None
    metavar = arguments[len(positionals)].metavar
    if metavar in KB_SLOTS:
        return "kb", None
    if metavar in ARTICLE_SLOTS and kb:
        return "article", kb
    return None, None


def _joined(words):
    """Words as typed, where bash split ``--db=x`` at the ``=``: ``--db``, ``=``, ``x``."""
    out: list[str] = []
    for word in words:
        if out and (word == "=" or out[-1].endswith("=")) and out[-1].startswith("-"):
            out[-1] += word
        else:
            out.append(word)
    return out


def _store(words, environ):
    """The store the words name (``--db PATH`` or ``--db=PATH``), else ``$KB_DB``."""
    words = _joined(words)
    found = environ.get("KB_DB") or None
    for i, word in enumerate(words[:-1]):
        if word == "--db" and i + 1 < len(words) - 1:
            found = words[i + 1]
        elif word.startswith("--db="):
            found = word[len("--db="):]
    return found


def _shown(title):
    """A title as one short field of a line."""
    title = " ".join((title or "").split())
    return title if len(title) <= TITLE_SHOWN else title[:TITLE_SHOWN - 1] + "\u2026"


def candidates(parser, words, environ):
    """``[(ID, description)]`` for the last of ``words`` (the word being typed)."""
    kind, kb_id = slot(parser, words)
    db_path = _store(words, environ)
    if kind is None or not db_path:
        return []
    prefix = words[-1] if words else ""
    if not db_path.startswith(("postgresql://", "postgres://")) and not os.path.isfile(db_path):
        return []  # opening would not make a store, but say nothing of a missing one either
    db = open_engine(db_path, timeout=TIMEOUT_S)
    try:
        with db.read():
            if kind == "kb":
                rows = [(row["knowledge_base_id"], row["name"] or "")
                        for row in db.kbs.list() if row["knowledge_base_id"].startswith(prefix)]
                return [(kb, _shown(name)) for kb, name in rows[:CANDIDATES_MAX]]
            kb = db.kbs.row(kb_id)
            if kb is None:
                return []
            return [(aid, _shown(title))
                    for aid, title in db.articles.ids_with_prefix(kb["pk"], prefix, CANDIDATES_MAX)]
    finally:
        db.close()


def complete(parser, words, environ, out):
    """``kb __complete``: print the candidates, one ``ID<TAB>title`` a line; exit 0 always."""
    try:
        found = candidates(parser, words, environ)
    except Exception:  # noqa: BLE001 (a TAB prints no traceback into a command line)
        found = []
    for value, description in found:
        out.write("%s\t%s\n" % (value, description) if description else value + "\n")
    return 0


def location(shell, environ):
    """Where ``shell`` looks for a user's completion of ``kb``, and what to tell them."""
    home = environ.get("HOME") or os.path.expanduser("~")
    if shell == "bash":
        base = environ.get("BASH_COMPLETION_USER_DIR") or os.path.join(
            environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share"),
            "bash-completion")
        return (os.path.join(base, "completions", PROG),
                "bash-completion loads it the first time kb is completed in a new shell")
    if shell == "zsh":
        folder = os.path.join(environ.get("ZDOTDIR") or home, ".zfunc")
        return (os.path.join(folder, "_" + PROG),
                "if %s is not on $fpath yet, add to ~/.zshrc before compinit: fpath=(%s $fpath); "
                "autoload -U compinit && compinit" % (folder, folder))
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return (os.path.join(base, "fish", "completions", PROG + ".fish"),
            "fish loads it in new shells")


def install(shell, text, yes, environ):
    """Write the script where ``shell`` looks for it; ``(path, what was done, the hint)``.
    InstallRefused for a file there that holds another text, unless ``yes``."""
    path, hint = location(shell, environ)
    try:
        with open(path, encoding="utf-8") as fh:
            present = fh.read()
    except FileNotFoundError:
        present = None
    except (OSError, UnicodeDecodeError):
        present = ""
    if present == text:
        return path, "unchanged", hint
    if present is not None and not yes:
        whose = ("an earlier kb's completion script" if MARKER in "".join(
            present.splitlines(True)[:2]) else "another file")
        raise InstallRefused("%s holds %s; kb completion %s --install --yes replaces it"
                             % (path, whose, shell))
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".kb-completion-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    return path, "replaced" if present is not None else "installed", hint
