"""The event log: its page (the latest events) and the live stream of new ones (server-sent
events, which the page's small script appends; without script the page is reloaded)."""

import asyncio
import json

from ....errors import ToolError

# Events the page shows when it opens.
RECENT = 50

# How often the stream looks for new events, and says it is alive between.
POLL_S = 1.0
KEEPALIVE_S = 15.0

# A stream ends after this long; the browser's EventSource reconnects with Last-Event-ID, so
# that a session that ended meanwhile stops receiving.
STREAM_S = 300.0


def page(page):
    """``/kb/{kb}/events``: the latest events, newest first, and where the stream starts."""
    kb_id = page.params["kb"]
    with page.reading() as store:
        head = store.head_sequence(kb_id)
        found = store.events(kb_id, max(0, head - RECENT), RECENT)
    events = list(reversed(found["events"]))
    return page.render("events.html", kb=kb_id, events=events, head=head)


def _frame(event):
    """One event as a server-sent event: its sequence as the ID, the event as JSON."""
    return ("id: %d\nevent: kb\ndata: %s\n\n" % (
        event["sequence"], json.dumps(event, ensure_ascii=False))).encode("utf-8")


def _after(page):
    """Where the stream starts: the browser's Last-Event-ID, else ``?after=``."""
    for value in (page.req.header(b"last-event-id"), page.arg("after")):
        if value is not None and value.isdigit() and len(value) < 19:
            return int(value)
    return None


def _poll(web, page, kb_id, after):
    """On a worker thread: ``(the events after ``after``, the new cursor)``; None when the
    session has ended or the knowledge base is gone."""
    if web.sessions.person(page.req) is None:
        return None
    try:
        with page.reading() as store:
            head = store.head_sequence(kb_id)
            if after is None or after > head:
                return [], head
            found = store.events(kb_id, after, 100)
    except ToolError:
        return None
    return found["events"], found["next_after_sequence"]


async def _gone(receive):
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def stream(web, page, receive, send):
    """``/kb/{kb}/events/stream``: new events as they are logged, until the client goes, the
    session ends, or ``STREAM_S`` passes."""
    kb_id = page.params["kb"]
    loop = asyncio.get_running_loop()
    if kb_id not in page.person.grants:
        await web.send(send, web.not_found())
        return
    first = await web.mcp.threads.run(loop, _poll, web, page, kb_id, _after(page))
    if first is None:
        await web.send(send, web.not_found())
        return
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"Content-Type", b"text/event-stream; charset=utf-8"), (b"Cache-Control", b"no-store"),
        (b"X-Accel-Buffering", b"no"), (b"X-Content-Type-Options", b"nosniff")]})
    await send({"type": "http.response.body", "body": b"retry: 1000\n\n", "more_body": True})
    events, after = first
    gone = asyncio.ensure_future(_gone(receive))
    started = quiet = loop.time()
    try:
        while True:
            if events:
                body = b"".join(_frame(event) for event in events)
                await send({"type": "http.response.body", "body": body, "more_body": True})
                quiet = loop.time()
            elif loop.time() - quiet >= KEEPALIVE_S:
                await send({"type": "http.response.body", "body": b":\n\n", "more_body": True})
                quiet = loop.time()
            if loop.time() - started >= STREAM_S:
                break
            done, _ = await asyncio.wait([gone], timeout=POLL_S)
            if gone in done:
                return
            polled = await web.mcp.threads.run(loop, _poll, web, page, kb_id, after)
            if polled is None:
                break
            events, after = polled
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        return
    finally:
        gone.cancel()
