"""Helpers for driving the real ASGI application with Channels' WebsocketCommunicator."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from channels.testing import WebsocketCommunicator

from agentsite.asgi import application

TIMEOUT = 5


async def connect(
    session_id: str,
    *,
    key: str | None = None,
    since: int | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
    query: dict[str, str] | None = None,
) -> tuple[WebsocketCommunicator, dict[str, Any]]:
    """Open a socket and return it with the first frame the server sent (connected or error). `query`: more
    query parameters (`create`, `agent_name`, `title`)."""
    params = dict(query or {})
    if key is not None:
        params["api_key"] = key
    if since is not None:
        params["since"] = str(since)
    query_string = urlencode(params)
    path = f"/api/v1/chat/ws/{session_id}" + (f"?{query_string}" if query_string else "")
    communicator = WebsocketCommunicator(application, path, headers=headers or [])
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected, "the server must accept the socket before it answers"
    first = await communicator.receive_json_from(timeout=TIMEOUT)
    return communicator, first


async def receive_until(
    communicator: WebsocketCommunicator, kind: str, *, status: str | None = None, timeout: float = TIMEOUT
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read frames until one of `kind` (and `status`) arrives; return it and everything read before it."""
    seen: list[dict[str, Any]] = []
    while True:
        frame = await communicator.receive_json_from(timeout=timeout)
        if frame["type"] == kind and (
            status is None or frame.get("status") == status or frame.get("data", {}).get("status") == status
        ):
            return frame, seen
        seen.append(frame)


async def send(communicator: WebsocketCommunicator, frame: dict[str, Any]) -> None:
    await communicator.send_to(text_data=json.dumps(frame))


async def closed_with(communicator: WebsocketCommunicator) -> int | None:
    output = await communicator.receive_output(timeout=TIMEOUT)
    assert output["type"] == "websocket.close", output
    return output.get("code")


async def rest(method: str, path: str, *, key: str, json_body: Any = None) -> Any:
    """A REST call through the real ASGI application, in the test's event loop.

    Views that reach live sessions (DELETE closes the session's controller, queue commands) must run
    as the server runs them; Django's sync test client in a thread would share asgiref's one
    thread-sensitive executor with the database calls they make, and wait on itself.
    """
    import httpx

    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        return await client.request(method, path, json=json_body, headers={"Authorization": f"Bearer {key}"})
