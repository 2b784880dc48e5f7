"""Markdown as a knowledge base reads and writes it: front matter, the title, the body.

Front matter is YAML between ``---`` lines (closed by ``---`` or ``...``) or TOML between
``+++`` lines. Of it the store reads ``title`` (a YAML plain, quoted, folded ``>`` or literal
``|`` scalar; a TOML basic or literal string), and what an export writes there: ``article_id``,
``version``, ``source``, ``published``. Other keys are allowed and ignored. Without a title
there, the first ``# `` heading is the title (and leaves the body); without one, the file's
name. Pure text work, apart from ``read_utf8_file``: ``kbcite.folder_scan`` walks folders.
"""

import json
import os
import re
from dataclasses import dataclass
from typing import Optional

from .errors import InvalidArgument
from .limits import CONTENT_MAX_BYTES, FILE_MAX_BYTES, TITLE_MAX
from .threeway import conflict_left
from .validation import is_blank

# The front matter keys an export writes and an import reads back, besides the title.
META_KEYS = ("article_id", "version", "source", "published")

_YAML_FENCE, _YAML_END = "---", ("---", "...")
_TOML_FENCE = "+++"
_BLOCK_HEADER = re.compile(r"^([|>])[+-]?\d?[+-]?\s*(?:#.*)?$")
_TOML_LINE = re.compile(r"^([A-Za-z0-9_-]+)\s*=\s*(.*)$")


@dataclass(frozen=True)
class SourceDocument:
    """One Markdown file as an import sees it: its path below the folder, title and content,
    and the article it names in its front matter (an export's), if any."""

    source: str
    title: str
    content: str
    article_id: Optional[str] = None
    version: Optional[str] = None
    published: bool = True


def fallback_title(stem):
    """The title a file's name gives: the name without its extension, cut to ``TITLE_MAX``
    characters (an ellipsis marks the cut), since a name may be longer than a title."""
    return stem if len(stem) <= TITLE_MAX else stem[:TITLE_MAX - 1].rstrip() + "\u2026"


def title_from_name(path):
    """The title the name of the Markdown file at ``path`` gives, as import takes it: the
    name without ``.md`` or ``.markdown`` (any case; another extension too), then
    ``fallback_title``."""
    name = os.path.basename(path)
    lower = name.lower()
    if lower.endswith(".markdown"):
        stem = name[:-len(".markdown")]
    elif lower.endswith(".md"):
        stem = name[:-len(".md")]
    else:
        stem = os.path.splitext(name)[0]
    return fallback_title(stem)


def parse_markdown(text, fallback_title):
    """``(title, body)`` of a Markdown text: front matter ``title``, else the first ``# ``
    heading (removed from the body), else ``fallback_title``. A BOM and front matter are
    stripped; raises ValueError for a text with no body or broken front matter."""
    title, body, _ = parse_document(text, fallback_title)
    return title, body


def parse_document(text, fallback_title):
    """``(title, body, meta)``: ``parse_markdown``'s, and the front matter's ``META_KEYS``.
    A text that still holds a merge conflict's markers is refused (ValueError)."""
    left = conflict_left(text)
    if left is not None:
        raise ValueError(
            "it still holds a merge conflict at line %d (%s): keep the lines you want between "
            "the markers, delete the <<<<<<<, ======= and >>>>>>> lines, then run the command "
            "again" % (left[0], left[1][:60]))
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines()
    meta = {}
    if lines and lines[0].rstrip() in (_YAML_FENCE, _TOML_FENCE):
        fence = lines[0].rstrip()
        closing = _YAML_END if fence == _YAML_FENCE else (_TOML_FENCE,)
        for end in range(1, len(lines)):
            if lines[end].rstrip() in closing:
                block = lines[1:end]
                meta = _yaml(block) if fence == _YAML_FENCE else _toml(block)
                lines = lines[end + 1:]
                break
        else:
            raise ValueError("its front matter (a first line %s) has no closing %s line"
                             % (fence, fence))
    title = meta.pop("title", None)
    if title is not None:
        # A title is one line: a literal block's line breaks become spaces.
        title = title.replace("\n", " ").strip() or None
    if title is None:
        for i, line in enumerate(lines):
            if line.startswith("# ") and line[2:].strip():
                title = line[2:].strip().rstrip("#").strip() or line[2:].strip()
                lines = lines[:i] + lines[i + 1:]
                break
    body = "\n".join(lines).strip("\n")
    if is_blank(body):
        raise ValueError("it has no content%s" % (" below its title" if title else ""))
    return (title if title is not None else fallback_title, body,
            {key: meta[key] for key in META_KEYS if key in meta})


def _yaml(lines):
    """The top-level scalars of a YAML front matter block: ``{key: text}``."""
    out, i = {}, 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#") or line[:1] in " \t":
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        block = _BLOCK_HEADER.match(value)
        if block:
            # A folded (>) or literal (|) block scalar: the indented lines that follow.
            body = []
            while i < len(lines) and (not lines[i].strip() or lines[i][:1] in " \t"):
                body.append(lines[i])
                i += 1
            out[key] = _block_scalar(body, block.group(1))
        elif value:
            out[key] = _yaml_scalar(value)
    return out


def _block_scalar(lines, style):
    """A YAML block scalar's text: its lines de-indented, folded into one line (``>``) or kept
    as lines (``|``); the trailing line breaks, which a title never keeps, dropped."""
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents) if indents else 0
    rows = [line[cut:].rstrip() if line.strip() else "" for line in lines]
    while rows and not rows[-1]:
        rows.pop()
    if style == "|":
        return "\n".join(rows)
    text, previous_blank = "", True
    for row in rows:
        if not row:
            text += "\n"
            previous_blank = True
        else:
            text += ("" if previous_blank else " ") + row
            previous_blank = False
    return text


def _yaml_scalar(value):
    """A one-line YAML scalar: quotes removed ('' and \\" unescaped), a trailing comment dropped."""
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return json.loads(value) if "\\" in value else value[1:-1]
    return value.split(" #", 1)[0].strip()


def _toml(lines):
    """The top-level string and boolean keys of a TOML front matter block: ``{key: text}``."""
    out = {}
    for line in lines:
        match = _TOML_LINE.match(line.strip())
        if not match or line.startswith("["):
            continue
        key, value = match.group(1).lower(), match.group(2).strip()
        if value.startswith('"') and not value.startswith('"""'):
            end = _string_end(value)
            if end:
                out[key] = json.loads(value[:end])
        elif value.startswith("'") and not value.startswith("'''"):
            end = value.find("'", 1)
            if end > 0:
                out[key] = value[1:end]
        elif value in ("true", "false"):
            out[key] = value
    return out


def _string_end(value):
    """Where a TOML basic string starting at ``value[0]`` ends (after its quote), or 0."""
    i = 1
    while i < len(value):
        if value[i] == "\\":
            i += 2
            continue
        if value[i] == '"':
            return i + 1
        i += 1
    return 0


def format_document(title, content, meta):
    """A Markdown file's text: YAML front matter holding the title and ``meta``'s keys (in
    ``META_KEYS`` order), then the content; ``parse_document`` reads the same values back."""
    lines = ["---", "title: %s" % json.dumps(title, ensure_ascii=False)]
    for key in META_KEYS:
        if meta.get(key) is None:
            continue
        value = meta[key]
        if isinstance(value, bool):
            lines.append("%s: %s" % (key, "true" if value else "false"))
        else:
            lines.append("%s: %s" % (key, json.dumps(value, ensure_ascii=False)))
    lines.append("---")
    return "\n".join(lines) + "\n\n" + content + ("" if content.endswith("\n") else "\n")


def format_like(original, title, content, meta):
    """A Markdown file's text in the form of ``original`` (the file as imported): its front
    matter kept line for line, only the keys it had among the title and ``META_KEYS`` given
    their new values; a ``# `` heading title put back where it stood; a BOM, the line breaks
    and the final newlines kept. ``parse_document`` reads ``title`` and ``content`` back from
    it; the store's import record, not the file, keeps the article's ID and version."""
    bom = "\ufeff" if original.startswith("\ufeff") else ""
    text = original[len(bom):]
    crlf = "\r\n" in text
    lines = text.splitlines()
    head, rest, in_front = [], lines, {}
    if lines and lines[0].rstrip() in (_YAML_FENCE, _TOML_FENCE):
        fence = lines[0].rstrip()
        closing = _YAML_END if fence == _YAML_FENCE else (_TOML_FENCE,)
        end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in closing), None)
        if end is not None:
            block = lines[1:end]
            in_front = _yaml(block) if fence == _YAML_FENCE else _toml(block)
            values = dict(meta, title=title)
            head = [lines[0]] + _set_keys(block, fence, {
                key: values[key] for key in in_front if values.get(key) is not None
                and in_front[key] != _scalar_text(values[key])}) + [lines[end]]
            rest = lines[end + 1:]
    new = content.strip("\n").split("\n")
    lead = _leading_blank(rest)
    heading = None if "title" in in_front else next(
        (i for i, line in enumerate(rest) if line.startswith("# ") and line[2:].strip()), None)
    if heading is None:
        body = rest[:lead] + new
    else:
        old_title = rest[heading][2:].strip().rstrip("#").strip() or rest[heading][2:].strip()
        line = rest[heading] if old_title == title else "# " + title
        # Body lines that stood above the heading (a badge, a comment) stay above it while the
        # new content still starts with them; else the heading goes back on top.
        above = rest[lead:heading] if heading >= lead else []
        old = "\n".join(rest[:heading] + rest[heading + 1:]).strip("\n").split("\n")
        if above and old[:len(above)] == above and new[:len(above)] == above:
            body = rest[:lead] + new[:len(above)] + [line] + new[len(above):]
        else:
            gap = _leading_blank(rest[heading + 1:])
            body = rest[:min(lead, heading)] + [line] + [""] * gap + new
    trail = text[len(text.rstrip("\r\n")):].replace("\r\n", "\n")
    out = "\n".join(head + body) + trail
    return bom + (out.replace("\n", "\r\n") if crlf else out)


def _leading_blank(lines):
    """How many blank lines start ``lines``."""
    count = 0
    while count < len(lines) and not lines[count].strip():
        count += 1
    return count


def _scalar_text(value):
    """A value as front matter's parser gives it back: text, or ``true``/``false``."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _set_keys(block, fence, values):
    """Front matter lines with the top-level keys of ``values`` given those values (a block
    scalar's or continued value's lines replaced too); every other line as it was."""
    out, i = [], 0
    while i < len(block):
        line = block[i]
        i += 1
        if fence == _YAML_FENCE:
            key = line.partition(":")[0].strip().lower() if line[:1] not in " \t#" else None
        else:
            match = _TOML_LINE.match(line.strip())
            key = match.group(1).lower() if match and not line.startswith("[") else None
        if key not in values:
            out.append(line)
            continue
        value = values[key]
        text = _scalar_text(value) if isinstance(value, bool) else \
            json.dumps(value, ensure_ascii=False)
        out.append(("%s: %s" if fence == _YAML_FENCE else "%s = %s")
                   % (line.partition(":" if fence == _YAML_FENCE else "=")[0].strip(), text))
        while fence == _YAML_FENCE and i < len(block) and block[i][:1] in " \t" and \
                block[i].strip():
            i += 1  # the old value's continuation lines
    return out


def read_utf8_file(path, label, argument, limit=FILE_MAX_BYTES):
    """The text of a UTF-8 file of at most ``limit`` bytes; InvalidArgument naming it (as
    ``label``) when it cannot be read, is larger or is not UTF-8. A larger file is refused
    from its size, or after reading ``limit + 1`` bytes (it may grow, or be no regular file),
    so memory stays near the limit whatever the file holds."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            raw = b"" if size > limit else fh.read(limit + 1)
    except OSError as exc:
        raise InvalidArgument("cannot read %s: %s" % (label, exc.strerror), argument=argument,
                              path=str(path)) from None
    if size > limit or len(raw) > limit:
        raise InvalidArgument(
            "%s is %s bytes, over the %d a file may hold (content at most %d bytes of UTF-8, "
            "1 MiB, plus its title and front matter)"
            % (label, size if size > limit else "more than %d" % limit, limit,
               CONTENT_MAX_BYTES), argument=argument, path=str(path))
    return decode_utf8(raw, label, argument, path=str(path))


def decode_utf8(raw, label, argument, **details):
    """Bytes as UTF-8 text; InvalidArgument naming ``label`` and the first bad byte's position
    when they are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument("%s is not UTF-8 text (byte %d is 0x%02x); save it as UTF-8"
                              % (label, exc.start, raw[exc.start]), argument=argument,
                              **details) from None
