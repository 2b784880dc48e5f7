"""Signing in and out: the token form, the one-time link, the end of a session.

The token goes in a POSTed form and comes back as a session cookie, never in a URL. A link's
code is in its URL, but a GET only shows a button: the POST uses it, so a mail scanner
that fetches the link signs nobody in.
"""

from .. import auth
from ..responses import redirect
from ...oauth.issuer import KeysUnavailable

# How long the sign-in form's CSRF cookie lasts.
LOGIN_FORM_S = 3600

TOKEN_MAX = 200


def _next(value):
    """Where to go after signing in: a path of this site, else the home page."""
    if isinstance(value, str) and value.startswith("/") and not value.startswith("//") \
            and "\\" not in value:
        return value
    return "/"


def _secure(page):
    return page.req.scope.get("scheme") == "https"


def _form(page, template, status=200, headers=(), **values):
    """A sign-in page with a fresh CSRF cookie and token."""
    csrf, secret = page.web.sessions.login_form()
    cookie = auth.set_cookie(auth.LOGIN_COOKIE, secret, _secure(page), LOGIN_FORM_S)
    issuer = page.web.issuer_sign_in
    return page.render(template, status=status, headers=[cookie] + list(headers),
                       login_csrf=csrf, issuer_name=issuer.name if issuer else None, **values)


def _signed_in(page, value, target, headers=()):
    return redirect(_next(target), [
        auth.set_cookie(auth.COOKIE, value, _secure(page)),
        auth.set_cookie(auth.LOGIN_COOKIE, "", _secure(page), 0)] + list(headers))


def login(page):
    """``/login``: the token form (GET); the token exchanged for a session (POST)."""
    if page.req.method == "GET":
        if page.person is not None:
            return redirect(_next(page.arg("next")))
        return _form(page, "login.html", target=_next(page.arg("next")))
    token = (page.field("token") or "").strip()
    target = _next(page.field("next"))
    value = page.web.sessions.sign_in(token) if 0 < len(token) <= TOKEN_MAX else None
    if value is None:
        return _form(page, "login.html", status=401, target=target,
                     problem="That token is not valid: it is mistyped, revoked, or another "
                             "store's. Paste the whole kbt_ token kb token create printed.")
    return _signed_in(page, value, target)


def link(page):
    """``/login/link?code=``: a button (GET) that signs in with a one-time code (POST)."""
    if page.req.method == "GET":
        found = auth.unpack(page.arg("code"))
        return _form(page, "link.html", code=page.arg("code") or "",
                     name=found[0] if found else None)
    value = page.web.sessions.sign_in_link(page.field("code") or "")
    if value is None:
        return _form(page, "login.html", status=401, target="/",
                     problem="That sign-in link was used already, has expired (links last "
                             "%d minutes), or its token was revoked: ask for a new one "
                             "(kb token link NAME), or sign in with the token."
                             % (auth.LINK_TTL_S // 60))
    return _signed_in(page, value, "/")


def issuer_start(page):
    """``/login/oidc?next=``: off to the team's issuer, with what must come back kept in a
    signed cookie (``oidc.IssuerSignIn``)."""
    issuer = page.web.issuer_sign_in
    if issuer is None:
        return page.not_found()
    from ..oidc import PENDING_COOKIE, PENDING_TTL_S
    url, cookie = issuer.start(page.req, _next(page.arg("next")))
    return redirect(url, [auth.set_cookie(PENDING_COOKIE, cookie, _secure(page), PENDING_TTL_S)])


def issuer_callback(page):
    """``/login/oidc/callback``: where the issuer sends the browser back; state, code, ID
    token and access token checked, then a session for the person."""
    issuer = page.web.issuer_sign_in
    if issuer is None:
        return page.not_found()
    from ..oidc import PENDING_COOKIE, SignInFailed
    done = auth.set_cookie(PENDING_COOKIE, "", _secure(page), 0)  # a pending sign-in is used once
    query = {name: values[0] for name, values in page.query.items()}
    try:
        identity, target = issuer.finish(page.req, query, auth.cookies(page.req).get(
            PENDING_COOKIE))
    except SignInFailed as exc:
        return _form(page, "login.html", status=400, headers=[done], target="/",
                     problem="Signing in with %s did not work: %s." % (issuer.name, exc))
    except KeysUnavailable as exc:
        return page.web.error(503, "The identity provider cannot be reached to check your "
                                   "sign-in (%s); try again in a moment." % exc)
    return _signed_in(page, page.web.sessions.sign_in_person(identity), target, [done])


def logout(page):
    """``POST /logout``: the session ends, in the store; the cookie is cleared."""
    if page.person is not None:
        page.web.sessions.sign_out(page.person)
    return redirect("/login", [auth.set_cookie(auth.COOKIE, "", _secure(page), 0)])
