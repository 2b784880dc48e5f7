"""Markdown as a knowledge base reads it: front matter, the title, the body; UTF-8 files.

Pure text work, apart from ``read_utf8_file``: the import (``kbcite.importer``) walks folders.
"""

import json
from dataclasses import dataclass

from .errors import InvalidArgument
from .validation import is_blank

@dataclass(frozen=True)
class SourceDocument:
    """One Markdown file as an import sees it: its path below the folder, title and content."""

    source: str
    title: str
    content: str


# YAML-style front matter: a first line of three dashes, ``key: value`` lines, a closing line
# of three dashes (or dots). Only ``title`` is used; other keys are allowed and ignored.
_FRONT_MATTER_END = ("---", "...")


def parse_markdown(text, fallback_title):
    """``(title, body)`` of a Markdown text: front matter ``title:``, else the first ``# ``
    heading (removed from the body), else ``fallback_title``. A BOM and front matter are
    stripped; raises ValueError for a text with no body."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines()
    title = None
    if lines and lines[0].rstrip() == "---":
        for end in range(1, len(lines)):
            if lines[end].rstrip() in _FRONT_MATTER_END:
                for line in lines[1:end]:
                    key, sep, value = line.partition(":")
                    if sep and key.strip().lower() == "title" and value.strip():
                        title = _yaml_scalar(value.strip())
                lines = lines[end + 1:]
                break
        else:
            raise ValueError("its front matter (a first line ---) has no closing --- line")
    if title is None:
        for i, line in enumerate(lines):
            if line.startswith("# ") and line[2:].strip():
                title = line[2:].strip().rstrip("#").strip() or line[2:].strip()
                lines = lines[:i] + lines[i + 1:]
                break
    body = "\n".join(lines).strip("\n")
    if is_blank(body):
        raise ValueError("it has no content%s" % (" below its title" if title else ""))
    return title if title is not None else fallback_title, body


def _yaml_scalar(value):
    """A one-line YAML scalar: quotes removed ('' and \\" unescaped), a trailing comment dropped."""
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return json.loads(value) if "\\" in value else value[1:-1]
    return value.split(" #", 1)[0].strip()


def read_utf8_file(path, label, argument):
    """The text of a UTF-8 file; InvalidArgument naming it (as ``label``) when it cannot be
    read or is not UTF-8."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise InvalidArgument("cannot read %s: %s" % (label, exc.strerror), argument=argument,
                              path=str(path)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument("%s is not UTF-8 text (byte %d is 0x%02x); save it as UTF-8"
                              % (label, exc.start, raw[exc.start]), argument=argument,
                              path=str(path)) from None
