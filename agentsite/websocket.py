"""The chat socket's base class (chat/consumers.py), chosen once at start-up (agentsite/stack.py).

With the speed layer it is the lean socket of agentsite/internals.py (trick 2, bursts in one write: trick
7). On the stock stack it is Channels' own `AsyncWebsocketConsumer` — a channel-layer channel per socket,
old database connections cleaned up before every frame, frames sent one by one through the middleware
— with the two sends chat/consumers.py uses, `send_text` and `send_texts`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from channels.generic.websocket import AsyncWebsocketConsumer

from agentsite.stack import STOCK_STACK


class StockWebsocketConsumer(AsyncWebsocketConsumer):
    """Channels' consumer as it is, plus the sends of the lean one."""

    async def send_text(self, text: str) -> None:
        await self.send(text_data=text)

    async def send_texts(self, texts: Sequence[str]) -> None:
        for text in texts:
            await self.send(text_data=text)


if TYPE_CHECKING or not STOCK_STACK:
    from agentsite.internals import LeanWebsocketConsumer as SocketConsumer
else:
    SocketConsumer = StockWebsocketConsumer


# -- the stock stack's `serve`: close codes daphne can send ------------------------------------------------

# autobahn lets an application close a socket with 1000 or 3000–4999 only; any other code makes daphne's
# close raise (in connect: the socket ends with 1011; in a task: it stays open). With the speed layer
# `serve` gives daphne sockets that send the contract's codes (agentsite/internals.py, trick 3).
AUTOBAHN_APPLICATION_CODES = range(3000, 5000)
NORMAL_CLOSURE = 1000

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class CloseCodesDaphneSends:
    """An ASGI wrapper for the stock stack's `serve`: a socket closed with a code autobahn refuses from an
    application (1009, 1011, 1012, 1013) is closed with 1000 instead, after the same `error` frame (its
    `code` says why: `unavailable` means reconnect with `?since=`). docs/deployment.md lists this."""

    def __init__(self, application: ASGIApp) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            await self.application(scope, receive, send)
            return

        async def send_closable(message: dict[str, Any]) -> None:
            if message["type"] == "websocket.close":
                code = message.get("code")
                if code is not None and code != NORMAL_CLOSURE and code not in AUTOBAHN_APPLICATION_CODES:
                    message = {**message, "code": NORMAL_CLOSURE}
            await send(message)

        await self.application(scope, receive, send_closable)
