"""``kb serve``'s settings: the config file (``kb.toml``, or ``[tool.kbcite]`` in
``pyproject.toml``), the environment (``KB_`` and the key), and what each key may hold.

The keys are the server's long options without their dashes (``max-body``, ``oauth-issuer``),
with ``db``, ``host`` and ``port``; an option given many times is a list (``allow-origins``,
``oauth-scopes``). Each key's environment variable is ``KB_`` and the key in capitals,
``-`` as ``_`` (``KB_MAX_BODY``); ``app_from_env`` (``uvicorn --factory``) reads the same
variables through the same checks, those that are the app's ``Settings``. A relative path in a
file is taken from the file's folder, so a unit or a container finds the same files whatever
its working directory. Secrets are never keys: ``KB_SIGNING_SECRET`` (or
``signing-secret-file``) and ``KB_OAUTH_CLIENT_SECRET`` stay in the environment.

Every value is checked before anything starts: a key that is not one, or a value of the wrong
type or out of range, is one ``ConfigError`` naming the file (or variable), the key and what
is allowed.
"""

import argparse
import difflib
import json
import os
from typing import Any

from .links import check_public_url
from .options import HTTP_DEFAULTS, MINIMUM, ORIGIN_FORM, POSITIVE, add_http_options, is_origin

try:
    import tomllib
except ImportError:  # Python 3.9 and 3.10: the [http] extra brings tomli, the same parser
    try:
        import tomli as tomllib
    except ImportError:
        tomllib = None

CONFIG_FILE = "kb.toml"
PYPROJECT = "pyproject.toml"

# Where kb serve listens unless told: this machine only, the port the docs use throughout.
HOST, PORT = "127.0.0.1", 8765

# Options given many times on the command line: a list in the file, the key in the plural.
LIST_KEYS = {"allow-origin": "allow-origins", "oauth-scope": "oauth-scopes"}

# Keys that name a file, taken from the config file's folder when relative.
PATH_KEYS = ("db", "ssl-certfile", "ssl-keyfile", "signing-secret-file", "log-file")

# Options that are not settings of a server kb serve starts: stdio's, and the secrets'.
NOT_KEYS = ("help", "version", "grant", "writes", "actor", "http", "config", "json", "check")

# The keys app_from_env takes, by their dest: those whose dest (or, where the app's Settings
# name it apart, the field beside it) is a field of Settings; the rest (workers, timeouts of the
# guarded protocol, TLS, logs) are kb-server's, outside the app, and host is the one a server
# listens on. The one secret among its Settings stays a variable of its own, as every secret.
APP_FIELDS = {"allow_origin": "allowed_origins", "oauth_scope": "oauth_scopes"}
NOT_APP_KEYS = ("db", "host")
APP_SECRET = ("KB_OAUTH_CLIENT_SECRET", "oauth_client_secret")

TOML_TYPES = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
              (list, "an array"), (dict, "a table"))


class ConfigError(Exception):
    """A setting that cannot be used: the message names where it came from and what is
    allowed."""


class Key:
    """One setting: its name in the file, its option's ``dest``, its kind and limits."""

    def __init__(self, name, dest, kind, choices=None, low=None, positive=False):
        self.name, self.dest, self.kind = name, dest, kind
        self.choices, self.low, self.positive = choices, low, positive

    @property
    def variable(self):
        """Its environment variable."""
        return "KB_" + self.name.upper().replace("-", "_")

    def allowed(self):
        """What the key may hold, in words."""
        if self.choices:
            return "one of %s" % ", ".join(self.choices)
        if self.name == "port":
            return "an integer from 0 to 65535"
        if self.kind is int:
            return "an integer of at least %d" % self.low if self.low is not None \
                else "an integer"
        if self.kind is float:
            return "a number greater than 0" if self.positive else "a number"
        if self.dest == "public_url":
            return "the address people's browsers reach the server at, http(s)://host[:port] " \
                   "with an optional path (https://kb.example.com/team)"
        if self.kind is list:
            return "an array of strings" + (" (%s)" % ORIGIN_FORM if self.dest ==
                                            "allow_origin" else "")
        return "a non-empty string"

    def check(self, value):
        """``value`` as the server takes it; ValueError (what is allowed) if it cannot be."""
        fits = {int: isinstance(value, int), float: isinstance(value, (int, float)),
                str: isinstance(value, str) and value != "",
                list: isinstance(value, list) and all(isinstance(v, str) and v for v in value)}
        if isinstance(value, bool) or not fits[self.kind]:
            raise ValueError(self.allowed())
        if self.kind is float:
            value = float(value)
        if (self.choices and value not in self.choices
                or self.name == "port" and not 0 <= value <= 65535
                or self.low is not None and value < self.low
                or self.positive and value <= 0
                or self.dest == "allow_origin" and not all(is_origin(v) for v in value)):
            raise ValueError(self.allowed())
        if self.dest == "public_url":
            try:
                value = check_public_url(value)
            except ValueError:
                raise ValueError(self.allowed()) from None
        return value

    def parse(self, text):
        """An environment variable's text as the server takes it; ValueError if it cannot."""
        if self.kind is list:
            value = [v for v in text.replace(",", " ").split() if v]
        else:
            try:
                value = self.kind(text)
            except ValueError:
                raise ValueError(self.allowed()) from None
        return self.check(value)


def keys():
    """``{name: Key}`` of every setting, made from the server's own options."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--db")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    add_http_options(parser)
    found = {}
    for action in parser._actions:
        name = action.option_strings[0][2:]
        if name in NOT_KEYS:
            continue
        kind = list if isinstance(action, argparse._AppendAction) else (action.type or str)
        name = LIST_KEYS.get(name, name)
        found[name] = Key(name, action.dest, kind, action.choices,
                          MINIMUM.get(action.dest), action.dest in POSITIVE)
    return found


def defaults():
    """``{dest: value}`` a server starts with when nothing sets it."""
    values: dict[str, Any] = {key.dest: None for key in keys().values()}
    values.update(HTTP_DEFAULTS)
    values.update(host=HOST, port=PORT, allow_origin=[], oauth_scope=[])
    parser = argparse.ArgumentParser(add_help=False)
    add_http_options(parser)
    values.update(vars(parser.parse_args([])))
    return values


def _type_of(value):
    """A TOML value's type in words."""
    for kind, words in TOML_TYPES:
        if isinstance(value, kind):
            return words
    return "a date or time"


def _shown(value):
    """A value as the error shows it: short, its type named where it is not a number."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, bool):
        return "%s (a boolean)" % str(value).lower()
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return json.dumps(value, default=str, ensure_ascii=False)[:120]
    if isinstance(value, str):
        return '"%s" (a string)' % value[:80]
    return "%s (%s)" % (value, _type_of(value))


def find(folder):
    """The config file of ``folder``: its kb.toml, else its pyproject.toml if that has a
    ``[tool.kbcite]`` table, else None."""
    path = os.path.normpath(os.path.join(folder, CONFIG_FILE))
    if os.path.isfile(path):
        return path
    path = os.path.normpath(os.path.join(folder, PYPROJECT))
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if tomllib is None:  # read() says what to install, if the file speaks of kb serve
            return path if b"kbcite" in data else None
        found = tomllib.loads(data.decode("utf-8")).get("tool", {}).get("kbcite")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        # A pyproject.toml that is not valid: read() names the fault, if it speaks of us.
        return path if b"kbcite" in data else None
    return path if found is not None else None


def read(path):
    """``(where, {dest: value})`` of the config file at ``path`` (a pyproject.toml's
    ``[tool.kbcite]`` table); ConfigError naming the file, the key and what is allowed."""
    pyproject = os.path.basename(path) == PYPROJECT
    where = "%s [tool.kbcite]" % path if pyproject else path
    if tomllib is None:
        raise ConfigError("%s: reading TOML on this Python needs tomli: pip install "
                          "'kbcite[http]'" % path)
    try:
        with open(path, "rb") as fh:
            data = tomllib.loads(fh.read().decode("utf-8"))
    except OSError as exc:
        raise ConfigError("%s: cannot read it: %s" % (path, exc.strerror or exc)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError("%s: not UTF-8 (byte %d)" % (path, exc.start)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("%s: not valid TOML: %s" % (path, exc)) from None
    if pyproject:
        data = data.get("tool", {}).get("kbcite")
        if not isinstance(data, dict):
            raise ConfigError("%s: no [tool.kbcite] table (put kb serve's settings there, or "
                              "in %s)" % (path, CONFIG_FILE))
    table = keys()
    values = {}
    for name, value in data.items():
        key = table.get(name)
        if key is None:
            near = difflib.get_close_matches(name.replace("_", "-"), table, n=1)
            raise ConfigError("%s: unknown key %r%s; the keys are: %s" % (
                where, name, " (did you mean %r?)" % near[0] if near else "",
                ", ".join(sorted(table))))
        try:
            value = key.check(value)
        except ValueError as exc:
            raise ConfigError("%s: key %r must be %s, got %s"
                              % (where, name, exc, _shown(value))) from None
        if name in PATH_KEYS and "://" not in value and not os.path.isabs(value):
            value = os.path.join(os.path.dirname(os.path.abspath(path)), value)
        values[key.dest] = value
    return where, values


def from_environment(environ, dests=None):
    """``{dest: value}`` of the ``KB_`` variables set (and not empty) in ``environ`` (those of
    ``dests`` alone, if given); ConfigError naming the variable and what is allowed."""
    values = {}
    for key in keys().values():
        if dests is not None and key.dest not in dests:
            continue
        text = environ.get(key.variable)
        if not text:
            continue
        try:
            values[key.dest] = key.parse(text)
        except ValueError as exc:
            raise ConfigError("$%s must be %s, got %r" % (key.variable, exc, text[:80])) \
                from None
    return values


def app_from_env(environ=None):
    """``uvicorn --factory kbcite.server.asgi:app_from_env``: the app for the store at
    ``$KB_DB``, signed with ``$KB_SIGNING_SECRET``, its ``Settings`` from the ``KB_``
    variables ``kb serve`` reads, checked alike; RuntimeError naming a variable that cannot
    be used."""
    import dataclasses

    from .http.settings import Settings, create_app

    environ = os.environ if environ is None else environ
    db = environ.get("KB_DB")
    if not db:
        raise RuntimeError("KB_DB is not set: export KB_DB=STORE (a file or a postgresql:// "
                           "URL made with kb init) before starting the app")
    fields = {field.name for field in dataclasses.fields(Settings)}
    taken = {dest: APP_FIELDS.get(dest, dest) for dest in (key.dest for key in keys().values())
             if dest not in NOT_APP_KEYS and APP_FIELDS.get(dest, dest) in fields}
    try:
        values = from_environment(environ, taken)
    except ConfigError as exc:
        raise RuntimeError(str(exc)) from None
    options = {taken[dest]: value for dest, value in values.items()}
    variable, field = APP_SECRET
    if environ.get(variable):
        options[field] = environ[variable]
    secret = environ.get("KB_SIGNING_SECRET")
    return create_app(db, signing_secret=secret.encode("utf-8") if secret else None, **options)
