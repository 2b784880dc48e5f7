"""The official MCP SDK's client over Streamable HTTP, entered and left with its HTTP client."""


class HttpSession:
    """An httpx2 client and the MCP client over it, entered and left together."""

    def __init__(self, http, client):
        self.http, self.client = http, client

    async def __aenter__(self):
        await self.http.__aenter__()
        return await self.client.__aenter__()

    async def __aexit__(self, *exc):
        try:
            return await self.client.__aexit__(*exc)
        finally:
            await self.http.__aexit__(None, None, None)
