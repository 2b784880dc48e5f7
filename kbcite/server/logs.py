"""The server's log: plain lines (the default) or one JSON object a line, on stderr or appended
to a file; the same configuration for the parent process and every uvicorn worker.

Standard library only, so the stdio server takes the same options. The JSON form carries the
record's time (UTC, milliseconds), level, logger and message; an access record (``access``,
one per HTTP request, see ``http.access_log``) carries its fields instead of a message.
"""

import json
import logging
import os
import time
from typing import Any

LOG_FORMATS = ("plain", "json")

PLAIN = "kb_server: %(levelname)s: %(message)s"

# What a record of the HTTP access log is given as ``extra``: the fields of its JSON line.
ACCESS = "access"

# The logger of the access log: one record a request, at INFO.
ACCESS_LOGGER = "kbcite.access"


def utc_time(seconds):
    """``2026-12-02T06:30:00.123Z``: a time stamp log shippers read without a time zone."""
    whole = int(seconds)
    return "%s.%03dZ" % (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)),
                         int((seconds - whole) * 1000))


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON: never a line break inside, whatever the message holds."""

    def format(self, record):
        """The record's line."""
        line = {"time": utc_time(record.created), "level": record.levelname,
                "logger": record.name}
        fields = getattr(record, ACCESS, None)
        if isinstance(fields, dict):
            line.update(fields)
        else:
            line["message"] = record.getMessage()
            if record.exc_info:
                line["exception"] = self.formatException(record.exc_info)
            elif record.exc_text:  # a record from the page process, formatted there
                line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def check_log_file(path):
    """Why ``path`` cannot be appended to (one line), or None: opened now, so a wrong path
    stops the server before it serves, not at its first line."""
    if os.path.isdir(path):
        return "%s is a folder; name a file (%s, say)" % (
            path, os.path.join(path, "kb-server.log"))
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        return "cannot append to %s: %s" % (path, exc.strerror or exc)
    return None


def log_config(log_format="plain", log_file=None, filters=None, levels=None):
    """A ``logging.config.dictConfig`` dictionary: the root's one handler (stderr, or
    ``log_file`` opened to append) in ``log_format``; ``filters`` (name: dotted class) on
    it, ``levels`` (logger: level) besides."""
    formatter = ({"()": "kbcite.server.logs.JsonFormatter"} if log_format == "json"
                 else {"format": PLAIN})
    handler: dict[str, Any] = ({"class": "logging.FileHandler", "filename": log_file, "mode": "a",
                "encoding": "utf-8"} if log_file else
               {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"})
    handler.update(formatter="kb", filters=sorted(filters or {}))
    return {"version": 1, "disable_existing_loggers": False,
            "filters": {name: {"()": target} for name, target in (filters or {}).items()},
            "formatters": {"kb": formatter}, "handlers": {"kb": handler},
            "root": {"handlers": ["kb"], "level": "INFO"},
            "loggers": {name: {"level": level} for name, level in (levels or {}).items()}}
