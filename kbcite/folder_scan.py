"""A folder of Markdown files, as an import reads it: which files it holds, read and checked.

What counts: files ending ``.md`` or ``.markdown`` in any case. What is left out: dot-folders
and dot-files (``.git``, ``.github``, ``.obsidian``, ``.hidden/secret.md``) and
``node_modules``, unless a ``.kbignore`` takes one back with ``!`` (``!..md``), and whatever a
``.kbignore`` file names (gitignore patterns; a ``.kbignore`` applies to its own folder and
everything below it). Links are followed, folders included, with each folder
read once (a link back into a folder already read is skipped, so no loop), and each file
imported once, however many links reach it (the first path in sorted order wins).

Every file is read and checked before anything is written, and every problem is collected:
one run names every bad file, in ``bad``; what was left out on purpose is in ``skipped``.
"""

import os
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidArgument, ToolError
from .markdown import SourceDocument, parse_document, read_utf8_file, title_from_name
from .threeway import conflict_left, pending_path
from .validation import check_new_article

EXTENSIONS = (".md", ".markdown")
IGNORE_FILE = ".kbignore"
# Left out wherever they are: a package manager's tree of other people's files.
IGNORED_NAMES = frozenset({"node_modules"})


@dataclass
class FolderRead:
    """What a folder held: the documents, the bad files and why, what was left out and why."""

    root: str
    documents: list = field(default_factory=list)
    bad: list = field(default_factory=list)  # {"source", "reason"}
    skipped: list = field(default_factory=list)  # {"source", "reason"}


class BadPattern(ValueError):
    """A ``.kbignore`` line that is no pattern (an empty ``[]``, a range ``[z-a]``)."""


def _bracket(body, line):
    """``(negated, ranges)`` of the body of a ``[...]`` in ``line``; BadPattern if it has none."""
    negated = body[:1] in ("!", "^")
    if negated:
        body = body[1:]
    ranges, i = [], 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            if body[i] > body[i + 2]:
                raise BadPattern("the range %s-%s in %r runs backwards"
                                 % (body[i], body[i + 2], line))
            ranges.append((body[i], body[i + 2]))
            i += 3
        else:
            ranges.append((body[i], body[i]))
            i += 1
    if not ranges:
        raise BadPattern("%r has an empty [] that no name can match" % line)
    return negated, tuple(ranges)


def _tokens(line):
    """The glob ``line`` as tokens for ``glob_match``: ``("lit", c)``, ``("one",)`` (``?``),
    ``("set", negated, ranges)``, ``("star",)`` (no ``/``), ``("any",)`` (``**``) and
    ``("skip", 2)`` (``**/`` may match nothing: skip it)."""
    tokens, i = [], 0
    while i < len(line):
        ch = line[i]
        if line.startswith("**/", i):
            tokens += [("skip", 2), ("any",), ("lit", "/")]
            i += 3
            continue
        if line.startswith("**", i):
            tokens.append(("any",))
            i += 2
            continue
        if ch == "*":
            tokens.append(("star",))
        elif ch == "?":
            tokens.append(("one",))
        elif ch == "[" and line.find("]", i + 1) >= 0:
            end = line.find("]", i + 1)
            tokens.append(("set",) + _bracket(line[i + 1:end], line))
            i = end
        else:
            tokens.append(("lit", ch))
        i += 1
    return tuple(tokens)


def _closure(tokens, states):
    """``states`` with every state reachable without reading a character."""
    todo, seen = list(states), set(states)
    while todo:
        i = todo.pop()
        if i >= len(tokens):
            continue
        kind = tokens[i][0]
        nexts = (i + 1,) if kind in ("star", "any") else \
            (i + 1, i + 1 + tokens[i][1]) if kind == "skip" else ()
        for j in nexts:
            if j not in seen:
                seen.add(j)
                todo.append(j)
    return seen


def glob_match(tokens, name):
    """Whether ``name`` matches the glob ``tokens`` whole: the states of the pattern are
    followed together, character by character, so the time is linear in the name (times the
    pattern's length) and never backtracks."""
    states = _closure(tokens, {0})
    for ch in name:
        step = set()
        for i in states:
            if i >= len(tokens):
                continue
            token = tokens[i]
            kind = token[0]
            if kind in ("star", "any"):
                if kind == "any" or ch != "/":
                    step.add(i)
            elif kind == "lit":
                if ch == token[1]:
                    step.add(i + 1)
            elif kind == "one":
                if ch != "/":
                    step.add(i + 1)
            elif kind == "set":
                inside = any(low <= ch <= high for low, high in token[2])
                if ch != "/" and inside != token[1]:
                    step.add(i + 1)
        if not step:
            return False
        states = _closure(tokens, step)
    return len(tokens) in states


def _pattern(line):
    """A gitignore pattern: ``(tokens, negated, directories only, anchored)``, or None for a
    blank line or a comment; BadPattern for a line that is no pattern."""
    line = line.rstrip("\n").rstrip()
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    if line.startswith("\\"):
        line = line[1:]
    directory = line.endswith("/")
    line = line.rstrip("/")
    anchored = "/" in line
    line = line.lstrip("/")
    return _tokens(line), negated, directory, anchored


def read_patterns(path, source=IGNORE_FILE, bad=None):
    """The patterns of one ``.kbignore`` file (none if it cannot be read as UTF-8 text); each
    line that is no pattern is added to ``bad`` as ``{"source", "reason"}`` naming its line."""
    patterns = []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = list(fh)
    except (OSError, UnicodeDecodeError):
        return []
    for number, line in enumerate(lines, 1):
        try:
            pattern = _pattern(line)
        except BadPattern as exc:
            if bad is not None:
                bad.append({"source": source,
                            "reason": "line %d is not a pattern: %s" % (number, exc)})
            continue
        if pattern is not None:
            patterns.append(pattern)
    return patterns


def ignored(rules, rel, is_dir, default=False):
    """Whether path ``rel`` (``/``-separated, from the root) is ignored by ``rules``, a list of
    ``(base folder, patterns)``: the last pattern that matches decides, as git's do; where none
    matches, ``default`` (True for a dot-name, which only a ``!`` pattern takes back in)."""
    verdict = default
    name = rel.rsplit("/", 1)[-1]
    for base, patterns in rules:
        if base and not rel.startswith(base + "/"):
            continue
        inner = rel[len(base) + 1:] if base else rel
        for tokens, negated, directory, anchored in patterns:
            if directory and not is_dir:
                continue
            if glob_match(tokens, inner if anchored else name):
                verdict = not negated
    return verdict


def _walk(root, result):
    """``(source, path)`` of every Markdown file below ``root`` that an import takes."""
    found: list[Any] = []
    seen_dirs: set[tuple[int, int]] = set()
    seen_files: dict[tuple[int, int], str] = {}

    def visit(folder, rel, rules):
        # A folder or file is known by its device and inode: the same whatever links led to
        # it, at one stat each (os.path.realpath takes one a path component).
        try:
            info = os.stat(folder)
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as exc:
            result.bad.append({"source": (rel or ".") + "/",
                               "reason": "cannot read the folder: %s" % exc.strerror})
            return
        if (info.st_dev, info.st_ino) in seen_dirs:
            result.skipped.append({"source": rel + "/", "reason": "a link back into a folder "
                                   "already read"})
            return
        seen_dirs.add((info.st_dev, info.st_ino))
        if any(entry.name == IGNORE_FILE for entry in entries):
            rules = rules + [(rel, read_patterns(
                os.path.join(folder, IGNORE_FILE),
                (rel + "/" + IGNORE_FILE) if rel else IGNORE_FILE, result.bad))]
        for entry in entries:
            name, path = entry.name, entry.path
            child = (rel + "/" + name) if rel else name
            try:
                is_dir = entry.is_dir()  # through a link, as os.path.isdir
            except OSError:
                is_dir = False
            if (name.startswith(".") or name in IGNORED_NAMES) and \
                    ignored(rules, child, is_dir, default=True):
                if is_dir or name.lower().endswith(EXTENSIONS):
                    result.skipped.append({"source": child + ("/" if is_dir else ""),
                                           "reason": "a dot-file or dot-folder"
                                           if name.startswith(".") else name})
                continue
            if ignored(rules, child, is_dir):
                if is_dir or name.lower().endswith(EXTENSIONS):
                    result.skipped.append({"source": child + ("/" if is_dir else ""),
                                           "reason": "named in %s" % IGNORE_FILE})
                continue
            if is_dir:
                visit(path, child, rules)
            elif name.lower().endswith(EXTENSIONS):
                try:
                    target = entry.stat()
                except OSError:
                    if entry.is_symlink():
                        result.bad.append({"source": child, "reason": "a link to nothing"})
                        continue
                    target = None  # unreadable: reading it names the cause
                key = (target.st_dev, target.st_ino) if target is not None else path
                if key in seen_files:
                    result.skipped.append({"source": child, "reason": "the same file as %s"
                                           % seen_files[key]})
                    continue
                seen_files[key] = child
                found.append((child, path))

    visit(root, "", [])
    return found


def read_folder(directory, progress=None):
    """Every Markdown file an import takes below ``directory``, read and checked: a
    ``FolderRead`` naming every bad file (nothing raised for them) and what was left out.

    Raises InvalidArgument only when ``directory`` is not a folder.
    """
    if not os.path.isdir(directory):
        raise InvalidArgument("%s is not a folder" % directory, argument="directory",
                              path=str(directory))
    result = FolderRead(os.path.abspath(directory))
    paths = _walk(directory, result)
    for done, (source, path) in enumerate(paths, 1):
        try:
            text = read_utf8_file(path, source, "directory")
            waiting = os.path.exists(pending_path(path)) and conflict_left(text, True)
            if waiting:  # kb merge's markers, a code block's too, while its merge waits
                raise ValueError("it still holds the conflict kb merge wrote, at line %d (%s): "
                                 "resolve it and run kb merge again" % (waiting[0],
                                                                        waiting[1][:60]))
            title, content, meta = parse_document(text, title_from_name(source))
            check_new_article(title, content, "title", "content")
        except (ValueError, ToolError) as exc:
            reason = exc.message if isinstance(exc, ToolError) else str(exc)
            result.bad.append({"source": source, "reason": reason.replace(source + " ", "", 1)
                               if reason.startswith(source + " ") else reason})
        else:
            result.documents.append(SourceDocument(
                source, title, content, meta.get("article_id"), meta.get("version"),
                str(meta.get("published", "true")).lower() not in ("false", "no", "off")))
        if progress is not None:
            progress("read", done, len(paths))
    return result


def read_markdown_folder(directory, progress=None):
    """Every Markdown file below ``directory`` as SourceDocuments, sorted by path; raises
    InvalidArgument naming every bad file when there is one."""
    found = read_folder(directory, progress)
    if found.bad:
        raise bad_files_error(found)
    return found.documents


def bad_files_error(found):
    """The invalid_argument naming every bad file of a folder, one a line."""
    return InvalidArgument(
        "%d file(s) cannot be imported, so nothing was (skip_bad=True imports the "
        "others):\n%s" % (len(found.bad), "\n".join(
            "  %s: %s" % (os.path.join(found.root, *b["source"].split("/")), b["reason"])
            for b in found.bad)), argument="directory", bad=found.bad)
