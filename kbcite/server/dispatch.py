"""One admission for both transports: what stdio and HTTP do with a routed message, and the
only caller of the protocol.

A transport hands in a message with its ``MessageRoute`` (``inbound``), the caller (a
``Principal``), the handshake session or none, and its own ways to reach the client: how to ask
it something, how to notify it, where its subscriptions are held. What comes back is an
``Outcome``: the response to send, a listen stream to open, or nothing (cancelled). The
transport decides only how bytes travel.
"""

import logging

from ..errors import WouldWait
from .approval import ApprovalSigner
from .calls import Call, Cancelled
from .jsonrpc import INTERNAL_ERROR, RpcError, error_response, is_request_id, result_response
from .protocol import Context, Listen, Protocol

log = logging.getLogger(__name__)


class Outcome:
    """What a request came to: ``response`` (None once cancelled), or ``listen`` (a
    subscriptions/listen stream for the transport to hold open); ``refused`` when it never
    reached the protocol (its ID already in flight in the session)."""

    __slots__ = ("call", "response", "listen", "refused")

    def __init__(self, call, response=None, listen=None, refused=False):
        self.call = call
        self.response = response
        self.listen = listen
        self.refused = refused


class LocalSessions:
    """The keeper of a session this process alone holds (stdio): what the client sends acts
    on it here. (Over HTTP the store keeps sessions for every process: ``http.handshakes``.)"""

    @staticmethod
    def initialized(session):
        """notifications/initialized: the client may now be asked questions."""
        session.initialized = True

    @staticmethod
    def cancel(session, params):
        """notifications/cancelled: the call it names stops."""
        session.cancel(params)

    @staticmethod
    def deliver(session, message):
        """The client's answer to one of our questions; False when it answers none."""
        return session.deliver(message)


class Dispatch:
    """Begins, serves and ends each request for either transport; acts on notifications and
    on the client's answers. A request that may wait (``route.may_wait``) is the transport's
    to put apart, since only it knows its threads."""

    def __init__(self, pool, signing_secret, approval_ttl, public_url=None):
        self.pool = pool
        # public_url: where people reach the pages (a proposal's link), None where unknown.
        self.protocol = Protocol(pool, ApprovalSigner(signing_secret, approval_ttl),
                                 public_url)

    @staticmethod
    def begin(message, session):
        """``(the request's Call, None)``, begun in its session where it has one, so that a
        cancellation can find it from now on; ``(None, an Outcome refusing it)`` when its ID
        is in flight there already."""
        if session is None:
            return Call(message["id"]), None  # 2026-07-28: the request is all there is
        try:
            return session.begin(message), None
        except RpcError as exc:
            return None, Outcome(None, error_response(message["id"], exc), refused=True)

    def serve(self, call, message, route, principal, session, ask=None, notify=None,
              subscriptions=None):
        """Answer a begun request, then end its call. ``ask(call, params)`` puts a question
        to the client, ``notify(message)`` tells it something now, ``subscriptions`` (``add``,
        ``remove``) holds what it subscribes to."""
        ctx = Context(principal=principal, call=call, session=session,
                      ask=(lambda params: ask(call, params)) if ask is not None else None,
                      modern=route.modern, meta=route.meta or {},
                      subscriptions=subscriptions, notify=notify)
        try:
            result = self.protocol.handle(message, ctx)
        except Cancelled:
            return Outcome(call)  # no response for it
        except WouldWait:
            raise  # nothing was written: the transport serves it again where it may wait
        except RpcError as exc:
            return Outcome(call, error_response(message["id"], exc))
        except Exception:  # a bug: the client hears -32603, the log has the traceback
            log.exception("%s failed", message.get("method"))
            return Outcome(call, error_response(message["id"], RpcError(INTERNAL_ERROR,
                                                                        "Internal error")))
        finally:
            if session is not None:
                session.end(call)
        if isinstance(result, Listen):
            return Outcome(call, listen=result)  # the transport opens the stream
        return Outcome(call, result_response(message["id"], result))

    @staticmethod
    def notification(message, session, keeper, listens=None):
        """Act on a client's notification: a cancellation ends a listen stream (``listens``
        holds them) or the call it names; initialized readies the session. Any other, and one
        whose params are not an object, is ignored."""
        method, params = message["method"], message.get("params")
        if params is not None and not isinstance(params, dict):
            log.info("ignored %s with params that are not an object", method)
            return
        params = params or {}
        if method == "notifications/cancelled":
            target = params.get("requestId")
            if listens is not None and is_request_id(target) and listens.end_listen(target):
                return  # the client ends its listen stream: no response for it
            if session is not None:
                keeper.cancel(session, params)
        elif method == "notifications/initialized":
            if session is not None:
                keeper.initialized(session)
        else:
            log.debug("ignored notification %s", method)

    @staticmethod
    def response(message, session, keeper):
        """The client's answer to a question of ours; False where it answers none here."""
        return keeper.deliver(session, message)
