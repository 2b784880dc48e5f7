"""``uvicorn --http kbcite.server.h11_guard:GuardedH11Protocol``, the name a deployment uses for
the guarded h11 protocol of ``http/h11_guard``."""

from .http.h11_guard import Guard, GuardedH11Protocol

__all__ = ["Guard", "GuardedH11Protocol"]
