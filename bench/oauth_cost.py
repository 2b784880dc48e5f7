"""What a team issuer's token costs the server beside a kb token, and how often it asks the issuer.

The server's own authentication step (``kbcite.server.http.auth.Auth.authenticate``) is timed
in this process on one store, alternating rounds: a ``kbt_`` token (one indexed read) against
an RS256 JWT of an issuer served on loopback (signature, claims, and the store's grants read),
the issuer's keys cached as in a running server. CPU time per call is ``time.process_time``
over each round; the figure is the median of the rounds' differences. Then a flood of tokens
naming unknown key IDs, for ``--flood-seconds``, counts the issuer's key-set fetches.

    python bench/oauth_cost.py [--rounds 7] [--calls 2000] [--flood-seconds 5]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from common import ROOT  # noqa: F401  (puts the checkout first on sys.path)

from joserfc import jwt
from joserfc.jwk import RSAKey

from kbcite.server.http.auth import Auth
from kbcite.server.http.settings import Settings
from kbcite.store import KBStore

AUDIENCE = "http://127.0.0.1:8765/mcp"


class Issuer(ThreadingHTTPServer):
    """An issuer's metadata and key set on loopback, counting the key-set fetches."""

    def __init__(self, key):
        super().__init__(("127.0.0.1", 0), Documents)
        self.key = key
        self.url = "http://127.0.0.1:%d" % self.server_address[1]
        self.jwks_fetches = 0


class Documents(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the standard library's name)
        server = self.server
        if self.path == "/.well-known/oauth-authorization-server":
            body = {"issuer": server.url, "jwks_uri": server.url + "/jwks",
                    "id_token_signing_alg_values_supported": ["RS256"]}
        elif self.path == "/jwks":
            server.jwks_fetches += 1
            body = {"keys": [server.key.as_dict(private=False)]}
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "max-age=300")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class Request:
    """The little of a request the authentication step reads."""

    client = "127.0.0.1:1"
    scope = {"scheme": "http", "root_path": ""}

    def __init__(self, token):
        self._value = "Bearer " + token

    def header(self, name):
        return self._value if name == b"authorization" else "127.0.0.1:8765"


def cpu_per_call(auth, store, token, calls):
    """Microseconds of this process's CPU per authentication of ``token``."""
    req = Request(token)
    started = time.process_time()
    for _ in range(calls):
        auth.authenticate(req, store)
    return (time.process_time() - started) / calls * 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--flood-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    for name in ("rounds", "calls"):
        if getattr(args, name) < 1:
            parser.error("argument --%s: at least 1" % name)
    key = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256", "use": "sig"})
    issuer = Issuer(key)
    threading.Thread(target=issuer.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kb.db")
        with KBStore(path, create=True) as store:
            store.create_knowledge_base("support")
            kb_token = store.tokens.create("bot", ["support"], "allow")
            store.grants.add("group", "editors", "support", "ask")
        auth = Auth(Settings(db=path, signing_secret=b"s" * 32, oauth_issuer=issuer.url,
                             oauth_audience=AUDIENCE))
        claims = {"iss": issuer.url, "aud": AUDIENCE, "sub": "alice", "groups": ["editors"],
                  "scope": "kb:support:write", "exp": int(time.time()) + 3600}
        person = jwt.encode({"alg": "RS256", "kid": "k1"}, claims, key, algorithms=["RS256"])
        rows = []
        with auth.borrow() as store:
            for _ in range(args.rounds):
                kb = cpu_per_call(auth, store, kb_token, args.calls)
                jwt_us = cpu_per_call(auth, store, person, args.calls)
                rows.append((kb, jwt_us))
            fetches_before = issuer.jwks_fetches
            flood, deadline = 0, time.monotonic() + args.flood_seconds
            while time.monotonic() < deadline:
                forged = jwt.encode({"alg": "RS256", "kid": "unknown-%d" % flood}, claims, key,
                                    algorithms=["RS256"])
                try:
                    auth.authenticate(Request(forged), store)
                except Exception:  # noqa: BLE001 (each is a 401 Refusal)
                    pass
                flood += 1
        auth.close()
    issuer.shutdown()
    extra = [j - k for k, j in rows]
    print("| token | CPU per authentication (median of %d rounds of %d) |" % (args.rounds,
                                                                          args.calls))
    print("|---|---|")
    print("| kb token (kbt_) | %.1f us |" % statistics.median(k for k, _ in rows))
    print("| issuer's JWT, RS256, keys cached | %.1f us |" % statistics.median(j for _, j in rows))
    print("| difference | %.1f us (rounds %.1f to %.1f) |" % (statistics.median(extra),
                                                              min(extra), max(extra)))
    print()
    print("%d tokens with unknown key IDs in %.0f s: %d key-set fetches"
          % (flood, args.flood_seconds, issuer.jwks_fetches - fetches_before))
    return 0


if __name__ == "__main__":
    sys.exit(main())
