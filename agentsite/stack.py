"""Which stack a process runs, decided once at start-up: the speed layer (default) or the stock one.

`AGENTSITE_STOCK_STACK=1` turns every trick of agentsite/internals.py and its friends off, and the plain
path of each library runs instead (docs/architecture.md, "The speed layer"):

- database calls from async code (agentsite/db.py): batched into asgiref's one database thread, whose
  connection stays open → Channels' `database_sync_to_async` (old connections cleaned up around each call);
- the chat socket (agentsite/websocket.py): the lean one of internals.py, bursts in one write → Channels'
  `AsyncWebsocketConsumer` (a channel-layer channel per socket, frames one by one);
- `serve` (agentsite/management/commands/serve.py): daphne with a factory that closes with 1009 and 1012,
  autobahn's `pformat` only for debug lines → daphne as it is (what changes: docs/deployment.md);
- HTTP (agentsite/asgi.py): `OneHopASGIHandler` → Django's `ASGIHandler`;
- a provider's streamed request (agents/llm.py): `SdkStreamRequest` → the SDK's
  `chat.completions.with_streaming_response.create(stream=True)`;
- subscribers' queues (agentsite/eventqueue.py): the slim `EventQueue` → `asyncio.Queue`;
- optional imports (agentsite/lean_imports.py): kept out → imported as the libraries import them.

Each of those places chooses once, when it is imported (or when `serve` starts), never per request or
frame; on the stock stack agentsite/internals.py is not even imported, so that a library upgrade that
broke a trick cannot keep the server from starting (tests/test_stack.py checks both). What the stock
stack does not keep of the contract is in docs/deployment.md.

The flag is read from the environment here, not from Django's settings, because agentsite/__init__.py
needs it before settings exist; settings.py shows the same value as `AGENTSITE_STOCK_STACK`.
"""

from __future__ import annotations

from agentsite.env import env_bool

STOCK_STACK: bool = env_bool("AGENTSITE_STOCK_STACK", False)

# The scope key under which accounts/ws_auth.py keeps the server's own `send` for the lean chat socket
# (agentsite/internals.py, trick 2): here so that ws_auth.py need not import internals.py.
SERVER_SEND = "agentsite.send"
