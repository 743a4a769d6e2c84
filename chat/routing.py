from __future__ import annotations

from django.urls import re_path

from chat.consumers import ChatConsumer

# Any session id string reaches the consumer; one that cannot exist gets `not_found` (docs/protocol.md §3).
websocket_urlpatterns = [re_path(r"^api/v1/chat/ws/(?P<session_id>[^/?]+)$", ChatConsumer.as_asgi())]
