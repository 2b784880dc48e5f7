# How a token lets its holder's edits through: a person approves each, all go, or none do.
WRITE_MODES = ("ask", "allow", "deny")

# Tokens are 32 random bytes (RFC 6750 bearer tokens need no more), prefixed so that one
# found in a log or a repository is recognisable, and stored only as a SHA-256.
TOKEN_PREFIX = "kbt_"

TOKEN_NAME_MAX = 64


def token_digest(token):
    """The SHA-256 under which a token is kept (hex); equal digests are compared in SQL."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
