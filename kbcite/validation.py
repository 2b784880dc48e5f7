"""Argument checks: the subset of JSON Schema our tools use, and the people's side's rules.

A refused argument is an ``InvalidArgument`` naming it and its limit; a caller's own text is
quoted back cut short (``shown``), so an error never echoes a megabyte.
"""

import re
import unicodedata

from .errors import InvalidArgument
from .limits import (
    CONTENT_MAX_BYTES,
    KB_ID_MAX,
    SHOWN_MAX,
    SOURCE_COMPONENT_MAX,
    SOURCE_MAX,
    TITLE_MAX,
)

# A new knowledge base's ID: ASCII letters, digits, '-', '_', '.', not starting with '-' (it
# would read as an option). IDs made before this rule keep working: only creation checks it.
KB_ID_RE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,%d}\Z" % (KB_ID_MAX - 1))


def check_text(value, argument):
    """Refuse strings SQLite or UTF-8 cannot hold faithfully: NUL and lone surrogates."""
    if "\x00" in value:
        raise InvalidArgument("%s must not contain NUL characters" % argument, argument=argument)
    if value.isascii():  # known from the string itself, not by reading it: no surrogate
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(
            "%s is not valid Unicode (it holds a lone surrogate)" % argument, argument=argument
        ) from None


def validate_arguments(schema, arguments):
    """Check ``arguments`` against one of our input schemas; return them with defaults unset.

    Covers exactly the JSON Schema keywords our tools use: type (object, array, string,
    integer), properties, required, additionalProperties, items, minItems, maxItems,
    minLength, maxLength, minimum, maximum, enum. A refusal names the argument by its path
    (``citations[3].updated_at``).
    """
    if not isinstance(arguments, dict):
        raise InvalidArgument(
            "arguments must be a JSON object, got %s" % type(arguments).__name__,
            argument="arguments",
        )
    return _object(schema, arguments, None)


def _object(schema, value, path):
    """An object checked against ``schema``; ``path`` None is the arguments themselves."""
    properties = schema["properties"]
    where = "argument" if path is None else "property of %s" % path
    for name in value:
        if not isinstance(name, str):
            raise InvalidArgument(
                "%s names must be strings, got %s %s"
                % ("argument" if path is None else "%s's property" % path, json_type(name),
                   shown(name)),
                argument="arguments" if path is None else path,
            )
        if name not in properties:
            raise InvalidArgument(
                "unknown %s %s; %s takes %s" % (where, shown(name),
                                                "this tool" if path is None else path,
                                                ", ".join(properties)),
                argument=clip(name) if path is None else path,
            )
    for name in schema["required"]:
        if name not in value:
            raise InvalidArgument("missing required %s %r" % (where, name),
                                  argument=_path(path, name))
    return {name: _value(properties[name], item, _path(path, name))
            for name, item in value.items()}


def _path(path, name):
    return name if path is None else "%s.%s" % (path, name)


def _value(rule, value, name):
    """One value checked against its rule; returns it (an integral float as an int)."""
    kind = rule["type"]
    if kind == "string":
        if not isinstance(value, str):
            raise InvalidArgument(
                "%s must be a string, got %s" % (name, json_type(value)), argument=name
            )
        check_text(value, name)
        if len(value) < rule.get("minLength", 0):
            raise InvalidArgument(
                "%s must not be empty" % name if rule["minLength"] == 1 and not value else
                "%s must be at least %d characters, got %d"
                % (name, rule["minLength"], len(value)),
                argument=name,
            )
        if "maxLength" in rule and len(value) > rule["maxLength"]:
            raise InvalidArgument(
                "%s must be at most %d characters, got %d"
                % (name, rule["maxLength"], len(value)),
                argument=name,
            )
        if "enum" in rule and value not in rule["enum"]:
            raise InvalidArgument(
                "%s must be one of %s, got %s" % (name, ", ".join(rule["enum"]), shown(value)),
                argument=name,
            )
    elif kind == "integer":
        # JSON Schema counts 3.0 as an integer; a bool is not a number.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument(
                "%s must be an integer, got %s" % (name, json_type(value)), argument=name
            )
        if value < rule.get("minimum", value):
            raise InvalidArgument(
                "%s must be at least %d, got %s" % (name, rule["minimum"], int_text(value)),
                argument=name,
            )
        if value > rule.get("maximum", value):
            raise InvalidArgument(
                "%s must be at most %d, got %s" % (name, rule["maximum"], int_text(value)),
                argument=name,
            )
    elif kind == "array":
        if not isinstance(value, list):
            raise InvalidArgument(
                "%s must be an array, got %s" % (name, json_type(value)), argument=name
            )
        if len(value) < rule.get("minItems", 0):
            raise InvalidArgument("%s must hold at least %d item(s), got %d"
                                  % (name, rule["minItems"], len(value)), argument=name)
        if "maxItems" in rule and len(value) > rule["maxItems"]:
            raise InvalidArgument("%s must hold at most %d items, got %d"
                                  % (name, rule["maxItems"], len(value)), argument=name)
        value = [_value(rule["items"], item, "%s[%d]" % (name, i)) for i, item in enumerate(value)]
    elif kind == "object":
        if not isinstance(value, dict):
            raise InvalidArgument(
                "%s must be an object, got %s" % (name, json_type(value)), argument=name
            )
        value = _object(rule, value, name)
    return value


def clip(text):
    """A caller's string cut to a length fit for an error message."""
    return text if len(text) <= SHOWN_MAX else text[:SHOWN_MAX] + "…"


def shown(value):
    """``repr`` of a caller's value for an error message, cut short: errors never echo megabytes."""
    if isinstance(value, str):
        return repr(clip(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return int_text(value)
    return repr(value)[:SHOWN_MAX]


def int_text(value):
    """An integer for an error message; past 18 digits only its size (str() refuses huge ones)."""
    if abs(value) < 10 ** 18:
        return "%d" % value
    return "%san integer of about %d digits" % ("-" if value < 0 else "",
                                                  int(value.bit_length() * 0.30103) + 1)


def json_type(value):
    """The JSON name of a value's type, for an error message (``null``, ``string``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def check_content(content, argument="content"):
    """Refuse content longer than ``CONTENT_MAX_BYTES`` of UTF-8."""
    size = len(content.encode("utf-8"))
    if size > CONTENT_MAX_BYTES:
        raise InvalidArgument(
            "%s must be at most %d bytes of UTF-8 (1 MiB), got %d"
            % (argument, CONTENT_MAX_BYTES, size),
            argument=argument,
        )


def is_blank(text):
    """Whether ``text`` has no visible character: only separators (Z*), controls and formats."""
    return all(unicodedata.category(ch)[0] == "Z" or unicodedata.category(ch) in ("Cc", "Cf")
               for ch in text)


def check_title(title, argument="title"):
    """Refuse a title without a visible character, or with a control character (a line break
    or a tab would break every one-line listing of it)."""
    if is_blank(title):
        raise InvalidArgument(
            "%s must not be blank: it needs a visible character, not only spaces, controls or "
            "zero-width characters" % argument, argument=argument)
    for at, ch in enumerate(title):
        if unicodedata.category(ch) == "Cc":
            raise InvalidArgument(
                "%s must be one line without control characters, got U+%04X at character %d "
                "(a line break or tab); put it in the content instead" % (argument, ord(ch),
                                                                         at + 1),
                argument=argument)


def check_kb_id(kb_id, argument="kb_id"):
    """Refuse a new knowledge base's ID unless it is 1 to ``KB_ID_MAX`` letters, digits, ``-``,
    ``_`` and ``.`` (ASCII), not starting with ``-``: a word for a shell, a URL and a file."""
    check_people_string(kb_id, argument, None)
    if not KB_ID_RE.match(kb_id):
        raise InvalidArgument(
            "%s %s is not a knowledge-base ID: use 1 to %d ASCII letters, digits, '-', '_' and "
            "'.', not starting with '-' (e.g. support-docs)" % (argument, shown(kb_id),
                                                               KB_ID_MAX),
            argument=argument)


def check_people_string(value, argument, max_length):
    """Refuse a people's-side argument that is not a non-empty string within ``max_length``."""
    if not isinstance(value, str):
        raise InvalidArgument("%s must be a string, got %s" % (argument, json_type(value)),
                              argument=argument)
    check_text(value, argument)
    if not value:
        raise InvalidArgument("%s must not be empty" % argument, argument=argument)
    if max_length is not None and len(value) > max_length:
        raise InvalidArgument("%s must be at most %d characters, got %d"
                              % (argument, max_length, len(value)), argument=argument)


def check_source(source, argument="source"):
    """Refuse a source path an export could not write inside its folder: it must be a
    relative ``/``-separated path without NUL, no empty, ``.`` or ``..`` component, each
    component at most ``SOURCE_COMPONENT_MAX`` bytes and the whole at most ``SOURCE_MAX``."""
    check_people_string(source, argument, None)
    size = len(source.encode("utf-8"))
    if size > SOURCE_MAX:
        raise InvalidArgument("%s must be at most %d bytes of UTF-8, got %d"
                              % (argument, SOURCE_MAX, size), argument=argument)
    for part in source.split("/"):
        if part in ("", ".", ".."):
            raise InvalidArgument(
                "%s %s must be a path inside the folder: no leading /, no empty, . or .. "
                "part" % (argument, shown(source)), argument=argument)
        if len(part.encode("utf-8")) > SOURCE_COMPONENT_MAX:
            raise InvalidArgument(
                "%s %s has a part of %d bytes; a file or folder name holds at most %d"
                % (argument, shown(source[:SHOWN_MAX]), len(part.encode("utf-8")),
                   SOURCE_COMPONENT_MAX), argument=argument)


def check_new_article(title, content, title_argument, content_argument):
    """Refuse a new article's title or content, naming the argument as given."""
    check_people_string(title, title_argument, TITLE_MAX)
    check_title(title, title_argument)
    check_people_string(content, content_argument, None)
    check_content(content, content_argument)


def granted_set(granted):
    """The granted knowledge-base IDs as a set; a lone string is a mistake, not a set of letters."""
    if isinstance(granted, str):
        raise TypeError("granted must be a collection of knowledge-base IDs, not a string")
    return frozenset(granted)
