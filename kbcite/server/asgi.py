"""kb-server's Streamable HTTP endpoint as an ASGI application, by the names a deployment uses:
``create_app`` to mount it in a team's own Starlette or FastAPI application, ``app_from_env``
for ``uvicorn --factory kbcite.server.asgi:app_from_env``. The app itself is ``http/``.
"""

from .config import app_from_env
from .http.app import MCP_PATH, METADATA_PATH, McpApp
from .http.settings import KEEPALIVE_S, MAX_BODY, Settings, create_app

__all__ = ["KEEPALIVE_S", "MAX_BODY", "MCP_PATH", "METADATA_PATH", "McpApp", "Settings",
           "app_from_env", "create_app"]
