"""A gateway in front of kb-server that adds a bearer token, as a team's OAuth gateway would.

The MCP conformance suite cannot send a token of its own. This proxy, on a loopback port of its
own, forwards each request to the server on a connection of its own, adding ``Authorization:
Bearer TOKEN`` where the request has none, and pipes the answer back (an event stream
included). Host and Origin are rewritten only where they name the proxy itself, so a client's
foreign Host or Origin (the suite's DNS-rebinding scenario) reaches the server as sent.
"""

import asyncio
import threading

# A request head the proxy reads at most (the suite's are small).
HEAD_MAX = 1024 * 1024


class AuthProxy:
    """``with AuthProxy(upstream_port, token) as proxy:`` serves on ``proxy.port``."""

    def __init__(self, upstream_port, token, host="127.0.0.1"):
        self.upstream = (host, upstream_port)
        self.token = token.encode("ascii")
        self.host = host
        self.port = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="auth-proxy")

    def __enter__(self):
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")
        return self

    def __exit__(self, *exc):
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self):
        """The MCP endpoint through the proxy."""
        return "http://%s:%d/mcp" % (self.host, self.port)

    def _run(self):
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._client, self.host, 0, limit=HEAD_MAX))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            self._loop.close()

    def _rewritten(self, head):
        """The head as the server gets it: our token in, Host and Origin ours, one request a
        connection."""
        lines = head.split(b"\r\n")
        ours = b"%s:%d" % (self.host.encode(), self.port)
        upstream = b"%s:%d" % (self.upstream[0].encode(), self.upstream[1])
        out = [lines[0]]
        has_token = False
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(b":")
            key, value = name.strip().lower(), value.strip()
            if key == b"connection":
                continue
            if key == b"authorization":
                has_token = True
            if key == b"host" and value == ours:
                line = b"Host: " + upstream
            if key == b"origin" and value in (b"http://" + ours,):
                line = b"Origin: http://" + upstream
            out.append(line)
        if not has_token:
            out.append(b"Authorization: Bearer " + self.token)
        out.append(b"Connection: close")
        return b"\r\n".join(out) + b"\r\n\r\n", lines

    @staticmethod
    async def _hangup(reader, up_writer):
        """Close the server's side as soon as the client closes its own (EOF)."""
        try:
            while await reader.read(65536):
                pass
        except ConnectionError:
            pass
        up_writer.close()

    async def _client(self, reader, writer):
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                        ConnectionError):
                    return
                rewritten, lines = self._rewritten(head)
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                body = await reader.readexactly(length) if length else b""
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
                hangup = asyncio.ensure_future(self._hangup(reader, up_writer))
                try:
                    up_writer.write(rewritten + body)
                    await up_writer.drain()
                    while True:
                        chunk = await up_reader.read(65536)
                        if not chunk:
                            break
                        writer.write(chunk)
                        await writer.drain()
                finally:
                    hangup.cancel()
                    # A client that goes away (one ending a long event stream) closes the
                    # server's side too, as it would without the gateway.
                    up_writer.close()
                return  # the answer said Connection: close; the client comes back for more
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()
