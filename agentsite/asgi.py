"""ASGI entry point: HTTP through Django (request_started, its middleware chain, the view and the response's
close in one hand-over to a thread of the handler's pool: agentsite/internals.py; Django's own ASGIHandler
on the stock stack, agentsite/stack.py), WebSockets through Channels with our authentication, and the
server process's start and stop (agentsite/lifecycle.py: the ASGI lifespan, or a warning without it)."""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
django.setup(set_prefix=False)  # what get_asgi_application() does before it builds Django's handler

from django.conf import settings  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402

from agentsite.stack import STOCK_STACK  # noqa: E402

django_asgi_app: ASGIHandler
if STOCK_STACK:
    django_asgi_app = ASGIHandler()  # what get_asgi_application() returns
else:
    from agentsite.internals import OneHopASGIHandler

    django_asgi_app = OneHopASGIHandler(threads=settings.AGENTSITE_REQUEST_THREADS)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from accounts.ws_auth import WebSocketAuthStack  # noqa: E402
from agentsite.lifecycle import Lifecycle  # noqa: E402
from chat.routing import websocket_urlpatterns  # noqa: E402

application = Lifecycle(
    ProtocolTypeRouter(
        {"http": django_asgi_app, "websocket": WebSocketAuthStack(URLRouter(websocket_urlpatterns))}
    )
)
