"""Versions: RFC 3339 text and microseconds since the epoch, and the strict step between them.

An article's ``updated_at`` is its version. The text is RFC 3339 UTC with microseconds and a
``Z``; the store compares versions as integers of microseconds, so that every spelling of the
same instant names the same version.
"""

import re
from datetime import datetime, timedelta, timezone

from .errors import InvalidArgument
from .limits import VERSION_STEP_US

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

# ASCII digits only, and \Z rather than $, which would let a trailing newline through.
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"([Zz]|[+-]\d{2}:\d{2})\Z",
    re.ASCII,
)


def format_version(us):
    """RFC 3339 UTC text, microseconds and ``Z``, of microseconds since the epoch."""
    dt = EPOCH + timedelta(microseconds=us)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (
        dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second, dt.microsecond
    )


def datetime_to_us(dt):
    """Microseconds since the epoch of an aware datetime."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError("the clock must return an aware datetime, got naive %r" % (dt,))
    return (dt - EPOCH) // timedelta(microseconds=1)


def parse_version(text, argument="expected_version"):
    """Microseconds since the epoch of an RFC 3339 date-time; ``None`` if finer than 1 us.

    Any spelling of the same instant gives the same number (offsets, no fraction, ``z``).
    An instant with nonzero digits past the microsecond can equal no version, hence ``None``.
    """
    m = _RFC3339.match(text)
    if not m:
        raise InvalidArgument(
            "%s %r is not an RFC 3339 date-time; send the updated_at of a citation, "
            "e.g. 2026-11-08T09:00:00.000000Z" % (argument, text),
            argument=argument,
        )
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, offset = m.group(7) or "", m.group(8)
    try:
        base = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    except ValueError as exc:
        raise InvalidArgument(
            "%s %r is not a valid date-time (%s)" % (argument, text, exc), argument=argument
        ) from None
    if offset not in ("Z", "z"):
        sign = 1 if offset[0] == "+" else -1
        oh, om = int(offset[1:3]), int(offset[4:6])
        if oh > 23 or om > 59:
            raise InvalidArgument(
                "%s %r has an invalid UTC offset" % (argument, text), argument=argument
            )
        try:
            base -= sign * timedelta(hours=oh, minutes=om)
        except OverflowError:
            raise InvalidArgument(
                "%s %r is outside the years 1-9999 in UTC" % (argument, text), argument=argument
            ) from None
    if fraction[6:].strip("0"):
        return None
    return datetime_to_us(base) + int((fraction + "000000")[:6])


def next_version(previous_us, now_us):
    """The version a save made at ``now_us`` gets: strictly after ``previous_us`` (if any),
    even when the clock stands still or steps back."""
    if previous_us is not None:
        return max(now_us, previous_us + VERSION_STEP_US)
    return now_us
