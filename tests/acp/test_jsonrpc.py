"""The JSON-RPC 2.0 connection (acp/jsonrpc.py) and the ACP binding on it (acp/peer.py)
against a scripted peer at the byte level.

Our side runs on the real strict transport over a socket pair; the test plays the runner by writing
raw lines and reading what we send, so ids, error objects and framing are checked as they travel.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from acp import schema
from acp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    ConnectionClosed,
    JsonRpcConnection,
    JsonRpcError,
    NotificationHandler,
    ProtocolViolation,
    RequestHandler,
)
from acp.peer import AcpPeer
from acp.transport import StrictNdjsonTransport

pytestmark = pytest.mark.timeout(10)
STEP = 5  # seconds any single expected frame may take


@dataclass
class Peer:
    """The other end of the wire: raw lines in, raw lines out."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def send(self, message: Mapping[str, Any] | str) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        self.writer.write(line.encode() + b"\n")
        await self.writer.drain()

    async def receive(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.reader.readline(), STEP)
        assert line, "our side closed the stream"
        message: dict[str, Any] = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        return message

    async def nothing_more(self, seconds: float = 0.2) -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(self.reader.readline(), seconds)

    def end(self) -> None:
        self.writer.close()


@dataclass
class Wire:
    conn: JsonRpcConnection
    transport: StrictNdjsonTransport
    peer: Peer


async def _open(
    requests: Mapping[str, RequestHandler] | None = None,
    notifications: Mapping[str, NotificationHandler] | None = None,
) -> Wire:
    ours, theirs = socket.socketpair()
    our_reader, our_writer = await asyncio.open_connection(sock=ours)
    peer_reader, peer_writer = await asyncio.open_connection(sock=theirs)
    transport = StrictNdjsonTransport(our_reader, our_writer)
    conn = JsonRpcConnection(transport, requests=requests, notifications=notifications, name="test")
    conn.start()
    return Wire(conn, transport, Peer(peer_reader, peer_writer))


@pytest.fixture
async def wire() -> AsyncIterator[Wire]:
    opened = await _open()
    yield opened
    await opened.conn.close()
    opened.peer.end()


async def test_concurrent_calls_each_get_their_own_answer_in_any_order(wire: Wire) -> None:
    calls = [asyncio.create_task(wire.conn.request("double", {"n": n})) for n in range(3)]
    sent = [await wire.peer.receive() for _ in calls]
    assert [m["method"] for m in sent] == ["double"] * 3
    assert len({m["id"] for m in sent}) == 3
    for message in reversed(sent):
        await wire.peer.send({"jsonrpc": "2.0", "id": message["id"], "result": message["params"]["n"] * 2})
    assert await asyncio.gather(*calls) == [0, 2, 4]


async def test_notifications_are_sent_without_an_id_and_params_only_when_given(wire: Wire) -> None:
    await wire.conn.notify("session/cancel", {"sessionId": "s1"})
    await wire.conn.notify("ping")
    assert await wire.peer.receive() == {
        "jsonrpc": "2.0",
        "method": "session/cancel",
        "params": {"sessionId": "s1"},
    }
    assert await wire.peer.receive() == {"jsonrpc": "2.0", "method": "ping"}


async def test_an_error_response_raises_with_code_message_and_data(wire: Wire) -> None:
    call = asyncio.create_task(wire.conn.request("initialize", {}))
    sent = await wire.peer.receive()
    error = {"code": -32603, "message": "Internal error", "data": {"details": "no"}}
    await wire.peer.send({"jsonrpc": "2.0", "id": sent["id"], "error": error})
    with pytest.raises(JsonRpcError) as raised:
        await call
    assert (raised.value.code, raised.value.message, raised.value.data) == (
        -32603,
        "Internal error",
        {"details": "no"},
    )
    assert raised.value.to_wire() == error


async def test_malformed_responses_fail_their_call_as_protocol_violations(wire: Wire) -> None:
    for bad in ({}, {"error": {"code": "x", "message": "m"}}, {"error": "boom"}):
        call = asyncio.create_task(wire.conn.request("m"))
        sent = await wire.peer.receive()
        await wire.peer.send({"jsonrpc": "2.0", "id": sent["id"], **bad})
        with pytest.raises(ProtocolViolation):
            await call
    # An answer nobody waits for (unknown id, or `true`, which is not the id 1) is ignored.
    call = asyncio.create_task(wire.conn.request("m"))
    sent = await wire.peer.receive()
    await wire.peer.send({"jsonrpc": "2.0", "id": 999, "result": "stray"})
    await wire.peer.send({"jsonrpc": "2.0", "id": True, "result": "stray"})
    await wire.peer.send({"jsonrpc": "2.0", "id": sent["id"], "result": None})
    assert await call is None


async def test_runner_requests_are_answered_with_the_handlers_result_or_error() -> None:
    release = asyncio.Event()

    async def echo(params: Any) -> Any:
        return {"echo": params}

    async def refuse(params: Any) -> Any:
        raise JsonRpcError(-32002, "Resource not found", {"path": params["path"]})

    async def crash(params: Any) -> Any:
        raise RuntimeError("handler bug")

    async def slow(params: Any) -> Any:
        await release.wait()
        return "done"

    handlers: dict[str, RequestHandler] = {"echo": echo, "refuse": refuse, "crash": crash, "slow": slow}
    wire = await _open(requests=handlers)
    peer = wire.peer
    try:
        await peer.send({"jsonrpc": "2.0", "id": "s", "method": "slow"})
        await peer.send({"jsonrpc": "2.0", "id": 7, "method": "echo", "params": [1, 2]})
        # The slow handler does not hold up the others.
        assert await peer.receive() == {"jsonrpc": "2.0", "id": 7, "result": {"echo": [1, 2]}}
        await peer.send({"jsonrpc": "2.0", "id": 8, "method": "refuse", "params": {"path": "/x"}})
        assert await peer.receive() == {
            "jsonrpc": "2.0",
            "id": 8,
            "error": {"code": -32002, "message": "Resource not found", "data": {"path": "/x"}},
        }
        await peer.send({"jsonrpc": "2.0", "id": 9, "method": "crash"})
        crashed = await peer.receive()
        assert crashed["id"] == 9 and crashed["error"]["code"] == INTERNAL_ERROR
        assert "handler bug" in json.dumps(crashed["error"]["data"])
        # While a runner's request is still being served, our own calls go through.
        call = asyncio.create_task(wire.conn.request("session/prompt"))
        sent = await peer.receive()
        await peer.send({"jsonrpc": "2.0", "id": sent["id"], "result": {"stopReason": "end_turn"}})
        assert await call == {"stopReason": "end_turn"}
        release.set()
        assert await peer.receive() == {"jsonrpc": "2.0", "id": "s", "result": "done"}
    finally:
        await wire.conn.close()
        peer.end()


async def test_unknown_methods_are_answered_method_not_found_and_unknown_notifications_ignored(
    wire: Wire,
) -> None:
    await wire.peer.send({"jsonrpc": "2.0", "method": "no/such_notification", "params": {}})
    await wire.peer.send({"jsonrpc": "2.0", "id": 3, "method": "terminal/create", "params": {}})
    answer = await wire.peer.receive()
    assert answer == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": METHOD_NOT_FOUND,
            "message": "Method not found",
            "data": {"method": "terminal/create"},
        },
    }
    await wire.peer.nothing_more()


async def test_malformed_requests_are_answered_invalid_request(wire: Wire) -> None:
    await wire.peer.send({"jsonrpc": "2.0", "id": {"not": "an id"}, "method": "x"})
    bad_id = await wire.peer.receive()
    assert bad_id["id"] is None and bad_id["error"]["code"] == INVALID_REQUEST
    await wire.peer.send({"jsonrpc": "2.0", "id": 4, "method": 12})
    bad_method = await wire.peer.receive()
    assert bad_method["id"] == 4 and bad_method["error"]["code"] == INVALID_REQUEST
    await wire.peer.send({"jsonrpc": "2.0", "id": 5, "method": "x", "params": "flat"})
    bad_params = await wire.peer.receive()
    assert bad_params["id"] == 5 and bad_params["error"]["code"] == INVALID_REQUEST
    # Malformed notifications cannot be answered; they are dropped and the connection carries on.
    await wire.peer.send({"jsonrpc": "2.0", "method": 12})
    await wire.peer.nothing_more()
    assert not wire.conn.ended


async def test_notifications_are_handled_in_order_before_the_next_message() -> None:
    seen: list[Any] = []

    async def slow_handler(params: Any) -> None:
        await asyncio.sleep(0.05)
        seen.append(params["n"])

    wire = await _open(notifications={"session/update": slow_handler, "sync": lambda p: seen.append(p["n"])})
    try:
        call = asyncio.create_task(wire.conn.request("session/prompt"))
        sent = await wire.peer.receive()
        for n in range(3):
            await wire.peer.send({"jsonrpc": "2.0", "method": "session/update", "params": {"n": n}})
        await wire.peer.send({"jsonrpc": "2.0", "method": "sync", "params": {"n": 3}})
        await wire.peer.send({"jsonrpc": "2.0", "id": sent["id"], "result": {}})
        await call
        assert seen == [0, 1, 2, 3]  # every update was handled before the answer was delivered
    finally:
        await wire.conn.close()
        wire.peer.end()


async def test_end_of_stream_fails_pending_and_later_calls(wire: Wire) -> None:
    calls = [asyncio.create_task(wire.conn.request("session/prompt")) for _ in range(2)]
    for _ in calls:
        await wire.peer.receive()
    wire.peer.end()
    for call in calls:
        with pytest.raises(ConnectionClosed):
            await call
    await asyncio.wait_for(wire.conn.wait_ended(), STEP)
    with pytest.raises(ConnectionError):
        await wire.conn.request("again")
    with pytest.raises(ConnectionError):
        await wire.conn.notify("again")


async def test_non_protocol_output_ends_the_stream_with_the_violation_as_the_reason(wire: Wire) -> None:
    call = asyncio.create_task(wire.conn.request("initialize"))
    await wire.peer.receive()
    await wire.peer.send("Welcome to some agent v2!")
    with pytest.raises(ConnectionClosed, match="non-protocol output on stdout"):
        await call
    assert wire.transport.violation is not None and "Welcome" in wire.transport.violation
    assert wire.conn.ended


async def test_close_fails_pending_calls_and_cancels_running_handlers() -> None:
    handler_cancelled = asyncio.Event()

    async def waits_for_user(params: Any) -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            handler_cancelled.set()
            raise

    wire = await _open(requests={"session/request_permission": waits_for_user})
    await wire.peer.send({"jsonrpc": "2.0", "id": 1, "method": "session/request_permission", "params": {}})
    call = asyncio.create_task(wire.conn.request("session/prompt"))
    await wire.peer.receive()
    await wire.conn.close()
    with pytest.raises(ConnectionClosed):
        await call
    assert handler_cancelled.is_set()
    # Our end of the stream is closed: the peer sees EOF, and no answer to the cancelled request.
    assert await asyncio.wait_for(wire.peer.reader.readline(), STEP) == b""
    wire.peer.end()


async def test_a_caller_giving_up_forgets_its_call_and_the_late_answer_is_ignored(wire: Wire) -> None:
    call = asyncio.create_task(wire.conn.request("slow"))
    sent = await wire.peer.receive()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await wire.peer.send({"jsonrpc": "2.0", "id": sent["id"], "result": "too late"})
    follow_up = asyncio.create_task(wire.conn.request("next"))
    second = await wire.peer.receive()
    assert second["id"] != sent["id"]
    await wire.peer.send({"jsonrpc": "2.0", "id": second["id"], "result": "ok"})
    assert await follow_up == "ok"


# -- the ACP binding on top (acp/peer.py) -----------------------------------------------------------


class RecordingHandlers:
    """ClientHandlers that record what reached them."""

    def __init__(self) -> None:
        self.updates: list[schema.SessionNotification] = []
        self.reads: list[schema.ReadTextFileRequest] = []

    def session_update(self, notification: schema.SessionNotification) -> None:
        self.updates.append(notification)

    async def request_permission(
        self, request: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        return schema.RequestPermissionResponse(outcome=schema.CancelledOutcome())

    async def read_text_file(self, request: schema.ReadTextFileRequest) -> schema.ReadTextFileResponse:
        self.reads.append(request)
        return schema.ReadTextFileResponse(content="text")

    async def write_text_file(self, request: schema.WriteTextFileRequest) -> schema.WriteTextFileResponse:
        return schema.WriteTextFileResponse()


async def test_acp_peer_checks_runner_messages_before_its_handlers_see_them() -> None:
    ours, theirs = socket.socketpair()
    transport = StrictNdjsonTransport(*await asyncio.open_connection(sock=ours))
    peer = Peer(*await asyncio.open_connection(sock=theirs))
    handlers = RecordingHandlers()
    acp_peer = AcpPeer(transport, handlers, name="test")
    acp_peer.start()
    try:
        await peer.send(
            {"jsonrpc": "2.0", "id": 1, "method": "fs/read_text_file", "params": {"sessionId": "s"}}
        )
        invalid = await peer.receive()
        assert invalid["id"] == 1 and invalid["error"]["code"] == INVALID_PARAMS
        assert any(error["loc"] == ["path"] for error in invalid["error"]["data"]["errors"])
        params = {"sessionId": "s", "path": "/w/a", "line": 2}
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "fs/read_text_file", "params": params})
        assert await peer.receive() == {"jsonrpc": "2.0", "id": 2, "result": {"content": "text"}}
        assert handlers.reads == [schema.ReadTextFileRequest(session_id="s", path="/w/a", line=2)]
        await peer.send({"jsonrpc": "2.0", "id": 3, "method": "terminal/create", "params": {"command": "ls"}})
        assert (await peer.receive())["error"]["code"] == METHOD_NOT_FOUND  # we do not offer terminals

        # An invalid update is dropped; the valid ones around it arrive, before the answer to the prompt.
        prompt = asyncio.create_task(acp_peer.prompt("s", "hi"))
        sent = await peer.receive()
        assert sent["method"] == "session/prompt"
        assert sent["params"] == {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}
        chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hello"}}
        for update in (chunk, {"sessionUpdate": "tool_call"}, chunk):
            await peer.send(
                {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}
            )
        await peer.send({"jsonrpc": "2.0", "id": sent["id"], "result": {"stopReason": "end_turn"}})
        assert (await prompt).stop_reason == "end_turn"
        assert [type(n.update) for n in handlers.updates] == [schema.AgentMessageChunk] * 2

        # A result that is not the message ACP prescribes is a validation error for the caller.
        prompt = asyncio.create_task(acp_peer.prompt("s", "again"))
        sent = await peer.receive()
        await peer.send({"jsonrpc": "2.0", "id": sent["id"], "result": {"stop": "?"}})
        with pytest.raises(ValidationError):
            await prompt
    finally:
        await acp_peer.close()
        peer.end()
