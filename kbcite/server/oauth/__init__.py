"""Team sign-in: the MCP endpoint as an OAuth 2.1 resource server (issuer, access tokens,
scopes)."""
