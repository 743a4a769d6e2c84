"""A scripted TurnStream and Runtime, plus small helpers, for tests of the queue and its surfaces.

The scripted turn stands in for the agent turn (the outside world of the controller): it streams one
delta, then waits until the test emits more events or releases it. Steered texts are kept in a FIFO
like the real turn does; `consume_inputs()` is what "the model saw them" means.

    runtime = ScriptedRuntime()
    controller = SessionController("s", runtime=runtime, lease=runtime.lease)
    await controller.submit(ChatRequest(message_id="A", content="hi"))
    stream = await runtime.stream_at(0)
    stream.release()            # the turn completes with final_content "re: hi"

`ScriptedRuntime(auto_release=True)` makes every turn complete right after its delta (for surface tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from agents.contract import ChatRequest, InputError, StreamClosed, TurnResult
from chat.live.queue import PendingItem

WAIT_SECONDS = 2.0
_RELEASE = {"type": "__release__"}


def echo_reply(request: ChatRequest) -> str:
    return f"re: {request.content}"


class StorageDown(Exception):
    """What a store's storage raises when it is away (a database that does not answer)."""


class ScriptedStream:
    """A TurnStream whose course the test drives: `emit(event)`, `release()`, `failure`, `error`."""

    def __init__(self, request: ChatRequest, session_id: str, *, reply: str, auto_release: bool = False):
        self.request = request
        self.session_id = session_id
        self.reply = reply
        self.inputs: list[str] = []  # every text steered into this turn, in order
        self.consumed: list[str] = []  # the texts the "model" has seen
        self.resolutions: list[tuple[str, bool, str | None]] = []
        self.failure: BaseException | None = None  # raised from iteration when released
        self.error: dict[str, str] | None = None  # makes result() an error result
        self.input_closed = False  # steer() raises StreamClosed (the turn is finishing)
        self.closed = False  # aclose() was awaited
        self.close_gate: asyncio.Event | None = None  # when set by a test, aclose() waits for it
        self.closing = asyncio.Event()  # aclose() has been entered
        self._unconsumed: list[str] = []
        self._outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._outbox.put_nowait({"type": "delta", "content": reply})
        if auto_release:
            self.release()

    # --- driven by the test
    def emit(self, event: dict[str, Any]) -> None:
        self._outbox.put_nowait(event)

    def release(self) -> None:
        """Let the turn end: with `failure` raised, an `error` result, or completed."""
        self._outbox.put_nowait(_RELEASE)

    # --- TurnStream
    def steer(self, text: str) -> None:
        if self.input_closed or self.closed:
            raise StreamClosed("the turn can no longer take input")
        self.inputs.append(text)
        self._unconsumed.append(text)

    def consume_inputs(self) -> list[str]:
        taken, self._unconsumed = self._unconsumed, []
        self.consumed.extend(taken)
        return taken

    def take_pending(self) -> list[str]:
        self.input_closed = True
        taken, self._unconsumed = self._unconsumed, []
        return taken

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._events()

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        while (event := await self._outbox.get()) is not _RELEASE:
            yield event
        if self.failure is not None:
            raise self.failure
        if self.error is None:
            self.consume_inputs()  # a real turn takes one more model step for waiting input
        self.input_closed = True

    async def result(self) -> TurnResult:
        if self.error is not None:
            return TurnResult(status="error", final_content="partial", stop_reason="error", error=self.error)
        return TurnResult(
            status="completed", final_content=self.reply, stop_reason="stop", usage={"total_tokens": 3}
        )

    async def aclose(self) -> None:
        self.input_closed = True
        self.closing.set()
        if self.close_gate is not None:
            await self.close_gate.wait()
        self.closed = True

    def resolve_confirmation(self, confirmation_id: str, approved: bool, option_id: str | None) -> None:
        if any(done[0] == confirmation_id for done in self.resolutions):
            raise InputError("already_resolved", f"Confirmation {confirmation_id} is already resolved.")
        self.resolutions.append((confirmation_id, approved, option_id))
        self.emit(
            {
                "type": "confirmation_resolved",
                "confirmation_id": confirmation_id,
                "approved": approved,
                "by": "user",
            }
        )


class ScriptedRuntime:
    """Creates ScriptedStreams and records them; `gate` (cleared) holds `lease()` like a busy server."""

    def __init__(
        self,
        *,
        auto_release: bool = False,
        reply: Callable[[ChatRequest], str] = echo_reply,
        open_async: bool = False,
    ) -> None:
        self.streams: list[ScriptedStream] = []
        self.auto_release = auto_release
        self.open_async = open_async  # stream() returns an awaitable, like a runtime that reads history
        self.reply = reply
        self.gate = asyncio.Event()
        self.gate.set()
        self._created = asyncio.Event()

    def stream(
        self, request: ChatRequest, *, session_id: str, token: int | None = None
    ) -> ScriptedStream | Coroutine[Any, Any, ScriptedStream]:
        # Called when the turn starts; the stream is made when the turn opens it, inside its lease.
        return self._open_later(request, session_id)

    async def _open_later(self, request: ChatRequest, session_id: str) -> ScriptedStream:
        if self.open_async:
            await asyncio.sleep(0)
        return self._open(request, session_id)

    def _open(self, request: ChatRequest, session_id: str) -> ScriptedStream:
        stream = ScriptedStream(
            request, session_id, reply=self.reply(request), auto_release=self.auto_release
        )
        self.streams.append(stream)
        self._created.set()
        return stream

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[None]:
        await self.gate.wait()
        yield

    async def stream_at(self, index: int) -> ScriptedStream:
        """The index-th stream created, waiting (briefly) until it exists."""
        async with asyncio.timeout(WAIT_SECONDS):
            while len(self.streams) <= index:
                self._created.clear()
                await self._created.wait()
        return self.streams[index]


class RecordingStore:
    """A QueueStore that writes into a shared `log`; `publish` adds events to the same log.

    Lets a test check that each state change was stored before its event went out.
    """

    def __init__(self) -> None:
        self.log: list[tuple[str, ...]] = []
        self.statuses: dict[str, str] = {}
        self.paused: bool | None = None
        self.errors: dict[str, dict[str, str]] = {}  # message id → the error its turn ended with
        self._seq = 0

    async def save_message(
        self, item: PendingItem, *, status: str, new: bool = False, error: dict[str, str] | None = None
    ) -> None:
        await asyncio.sleep(0)  # a real store awaits I/O: let other tasks run meanwhile
        if new and item.request.message_id in self.statuses:  # as the database's unique constraint does
            raise InputError(
                "duplicate_message_id", "Message already exists.", message_id=item.request.message_id
            )
        self.statuses[item.request.message_id] = status
        if error is not None:
            self.errors[item.request.message_id] = error
        self.log.append(("store", item.request.message_id, status))

    async def save_paused(self, paused: bool) -> None:
        await asyncio.sleep(0)
        self.paused = paused
        self.log.append(("paused", str(paused)))

    def storage_failed(self, exc: BaseException) -> bool:
        if isinstance(exc, StorageDown):
            self.log.append(("storage_failed", str(exc)))
            return True
        return False

    def publish(self, event: dict[str, Any]) -> dict[str, Any]:
        self._seq += 1
        event["seq"] = self._seq
        self.log.append(("event", event.get("message_id", ""), event.get("status") or event["type"]))
        return event


async def next_event(queue: asyncio.Queue[dict[str, Any]], kind: str, **fields: Any) -> dict[str, Any]:
    """The next event of type `kind` whose fields match, skipping others (fails after WAIT_SECONDS)."""
    async with asyncio.timeout(WAIT_SECONDS):
        while True:
            event = await queue.get()
            if event["type"] == kind and all(event.get(k) == v for k, v in fields.items()):
                return event


def drain(queue: asyncio.Queue[dict[str, Any]]) -> list[dict[str, Any]]:
    """Everything already delivered to the queue, without waiting."""
    events = []
    while not queue.empty():
        events.append(queue.get_nowait())
    return events


def request(message_id: str, content: str | None = None, **kwargs: Any) -> ChatRequest:
    return ChatRequest(
        message_id=message_id, content=content if content is not None else message_id, **kwargs
    )
