"""ASGI entry point: HTTP through Django, WebSockets through Channels with our authentication, and the
server process's start and stop (agentsite/lifecycle.py: the ASGI lifespan, or a warning without it)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from agentsite.lifecycle import Lifecycle  # noqa: E402
from agentsite.ws_auth import WebSocketAuthStack  # noqa: E402
from chat.routing import websocket_urlpatterns  # noqa: E402

application = Lifecycle(
    ProtocolTypeRouter(
        {"http": django_asgi_app, "websocket": WebSocketAuthStack(URLRouter(websocket_urlpatterns))}
    )
)
