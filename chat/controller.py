"""One chat session's queue: pending messages, the active turn, steering, cancel, pause, subscribers.

This is the one place that knows the queue semantics of PROTOCOL §3.4. It is plain asyncio (no Django):
the turn is reached only through the `TurnStream` interface, persistence through an injected
`QueueStore` and event numbering through an injected `publish` callable, so every rule here is
unit-testable with a scripted stream and no database.

Concurrency model: one `asyncio.Lock` serialises every state change that awaits the store (commands
and the start/end of a turn). A turn runs in its own task; only that task moves the session from
"turn running" to "idle" or "next turn started", so each `result` is published before the next
`started`. `cancel()`/`close()` never await the task while holding the lock.
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
import itertools
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agents.contract import ChatRequest, InputError, Runtime, StreamClosed, TurnResult, TurnStream
from agentsite.eventqueue import EventQueue

logger = logging.getLogger(__name__)

TurnOutcome = Literal["completed", "error", "cancelled"]

INTERNAL_ERROR = {"code": "internal_error", "message": "The turn failed because of an internal error."}
# Not published for a message with ChatRequest.stream_events=False (cron dispatch mode "final").
_STREAM_ONLY_EVENTS = frozenset({"delta", "thinking", "tool_call", "tool_result", "delegate_update"})
_RESOLVED_MEMORY = 1024  # answered confirmation ids remembered, so a late reply gets "already_resolved"


@dataclass
class PendingItem:
    request: ChatRequest
    order: int  # submission ordinal within the session; restore puts items back by it
    steer_requested: bool = False  # a deferred steer: the turn has not started streaming yet


class QueueStore(Protocol):
    async def save_message(self, item: PendingItem, *, status: str) -> None: ...
    async def save_paused(self, paused: bool) -> None: ...


Publish = Callable[[dict[str, Any]], dict[str, Any]]
Lease = Callable[[], AbstractAsyncContextManager[Any]]


def counting_publish() -> Publish:
    """The default publish: seq 1, 2, 3... (the Django layer injects its EventLog instead)."""
    counter = itertools.count(1)

    def publish(event: dict[str, Any]) -> dict[str, Any]:
        event["seq"] = next(counter)
        return event

    return publish


def _order_key(item: PendingItem) -> int:
    return item.order


class SessionController:
    """The pending queue, active turn and subscribers of one live session (PROTOCOL §3.4)."""

    def __init__(
        self,
        session_id: str,
        *,
        runtime: Runtime,
        lease: Lease,
        store: QueueStore | None = None,
        publish: Publish | None = None,
        pending: Sequence[PendingItem] = (),
        paused: bool = False,
        next_order: int = 0,
        on_turn_change: Callable[[int], None] | None = None,
    ) -> None:
        self.session_id = session_id
        self._runtime = runtime
        self._lease = lease
        self._store = store
        self._publish = publish or counting_publish()
        self.on_turn_change = on_turn_change  # public: the service attaches its counter when unset
        self.pending: list[PendingItem] = sorted(pending, key=_order_key)
        for item in self.pending:
            item.steer_requested = False  # deferred steers belonged to a turn that no longer exists
        self._next_order = max(next_order, max((i.order + 1 for i in self.pending), default=0))
        self.paused = paused
        self.closed = False
        self.active_request: ChatRequest | None = None
        self._active_item: PendingItem | None = None
        self.active_stream: TurnStream | None = None
        self.active_task: asyncio.Task[None] | None = None
        self._steered: list[PendingItem] = []  # handed to the active turn, in steer order
        self._unconsumed = 0  # how many of them the turn had not consumed when it ended
        self._cancellable = False  # the active task may be cancelled (it has not begun to close)
        self._cancel_requested = False
        self._confirmations: dict[str, dict[str, Any]] = {}
        self._resolved: dict[str, None] = {}
        self._subscribers: list[EventQueue] = []
        self._lock = asyncio.Lock()
        self._sealed = False  # closed and done: nothing is published any more
        self._close_done: asyncio.Event | None = None

    # ------------------------------------------------------------------ commands

    async def submit(self, request: ChatRequest, *, steer: bool = False) -> dict[str, Any]:
        """Queue a message; start it when idle (and not paused, unless `steer` = "send now")."""
        async with self._lock:
            self._check_open(request.message_id)
            self._check_unique(request.message_id)
            item = PendingItem(request=request, order=self._next_order)
            self._next_order += 1
            if self.active_task is None and (steer or (not self.paused and not self.pending)):
                await self._start(item, unpause=steer)
                return self._ack(item, "started")
            bisect.insort(self.pending, item, key=_order_key)
            if steer:
                return await self._steer_into_turn(item, fresh=True)
            await self._save(item, "pending")
            ack = self._announce(item, "queued")
            await self._start_head_if_idle()
            return ack

    async def steer(self, message_id: str) -> dict[str, Any]:
        """Hand a pending message to the running turn, or start it at once when idle ("send now")."""
        async with self._lock:
            self._check_open(message_id)
            item = self._find_pending(message_id)
            if self.active_task is None:
                self.pending.remove(item)
                await self._start(item, unpause=True)
                return self._ack(item, "started")
            return await self._steer_into_turn(item, fresh=False)

    async def remove(self, message_id: str) -> dict[str, Any]:
        """Drop a pending message."""
        async with self._lock:
            self._check_open(message_id)
            item = self._find_pending(message_id)
            await self._save(item, "removed")
            self.pending.remove(item)
            self._emit({"type": "message_status", "message_id": message_id, "status": "removed"})
            return self._ack(item, "removed")

    async def cancel(self) -> None:
        """End the turn with `result cancelled` (also when idle) and pause the queue."""
        async with self._lock:
            if self.closed:
                return
            await self._set_paused(True)
            task = self.active_task
            cancelled_turn = self._cancel_active_turn()
            if task is None:
                self._emit({"type": "result", "data": {"status": "cancelled"}})
                return
        await self._settle(task)
        if not cancelled_turn:
            # The turn was already finishing and reported its own outcome; the cancel still answers.
            async with self._lock:
                self._emit({"type": "result", "data": {"status": "cancelled"}})

    async def resolve_confirmation(
        self, confirmation_id: str, approved: bool, option_id: str | None = None
    ) -> dict[str, Any]:
        """Answer a pending confirmation of the running turn."""
        if self.closed:
            raise InputError("session_closed", f"Session {self.session_id} is closed.")
        if confirmation_id in self._confirmations and self.active_stream is not None:
            self.active_stream.resolve_confirmation(confirmation_id, approved, option_id)
            reply: dict[str, Any] = {"confirmation_id": confirmation_id, "approved": approved}
            if option_id is not None:
                reply["option_id"] = option_id
            return reply
        if confirmation_id in self._resolved:
            raise InputError("already_resolved", f"Confirmation {confirmation_id} is already resolved.")
        raise InputError("not_found", f"Confirmation {confirmation_id} not found.")

    async def close(self) -> None:
        """Cancel the turn, clear the queue (stored as "closed"), refuse input, publish nothing more."""
        if self._close_done is not None:
            await self._close_done.wait()
            return
        self._close_done = asyncio.Event()
        try:
            async with self._lock:
                self.closed = True
                task = self.active_task
                self._cancel_active_turn()
            if task is not None:
                await self._settle(task)
            async with self._lock:
                for item in self.pending:
                    await self._save(item, "closed")
                self.pending.clear()
                self._sealed = True
                self._subscribers.clear()
        finally:
            self._close_done.set()

    async def interrupt_stored_turn(self, message_id: str) -> None:
        """At start-up: a turn that was running when the server stopped ends `interrupted`; pause.

        Only the message id is known here, so the item given to the store carries an empty content
        and order -1; the store only needs to update that message's status.
        """
        async with self._lock:
            if self.closed:
                return
            placeholder = PendingItem(request=ChatRequest(message_id=message_id, content=""), order=-1)
            await self._save(placeholder, "interrupted")
            await self._set_paused(True)
            self._emit({"type": "result", "message_id": message_id, "data": {"status": "interrupted"}})

    def announce(self, event: dict[str, Any]) -> None:
        """Publish an event that no turn produced, e.g. the assistant message a cron text job adds
        (cron/runner.py): numbered and delivered like every other event; ignored once the session closed."""
        self._emit(dict(event))

    async def kick(self) -> None:
        """Start the head of the queue if nothing runs and the queue is not paused (after a takeover
        finds messages that were stored while the session had no owner)."""
        async with self._lock:
            if not self.closed:
                await self._start_head_if_idle()

    async def abandon(self) -> None:
        """This process lost the session to another owner (fencing): stop the turn and forget
        everything without storing or publishing anything more; the new owner has the truth."""
        self._store = None
        self._publish = lambda event: event
        self._subscribers.clear()
        await self.close()

    # ------------------------------------------------------------------ subscribers

    def subscribe(self) -> tuple[EventQueue, dict[str, Any]]:
        """A queue of every later event plus the state it starts from (taken atomically)."""
        queue = EventQueue()
        if not self._sealed:
            self._subscribers.append(queue)
        return queue, self.snapshot()

    def unsubscribe(self, queue: EventQueue) -> None:
        if queue in self._subscribers:
            self._subscribers.remove(queue)

    @property
    def idle(self) -> bool:
        """Nothing runs, nothing waits, nobody listens: the controller can be dropped and reloaded later."""
        return self.active_task is None and not self.pending and not self._subscribers and not self.closed

    def snapshot(self) -> dict[str, Any]:
        """PROTOCOL §3.3 SNAPSHOT."""
        return {
            "running": self.active_task is not None,
            "paused": self.paused,
            "active_message_id": self.active_request.message_id if self.active_request else None,
            "pending": [
                {
                    "message_id": item.request.message_id,
                    "content": item.request.content,
                    "position": position,
                    "steer_requested": item.steer_requested,
                }
                for position, item in enumerate(self.pending)
            ],
            "confirmations": [dict(data) for data in self._confirmations.values()],
        }

    # ------------------------------------------------------------------ command helpers

    def _check_open(self, message_id: str | None) -> None:
        if self.closed:
            raise InputError("session_closed", f"Session {self.session_id} is closed.", message_id=message_id)

    def _check_unique(self, message_id: str) -> None:
        taken = {item.request.message_id for item in (*self.pending, *self._steered)}
        if self.active_request is not None:
            taken.add(self.active_request.message_id)
        if message_id in taken:
            raise InputError(
                "duplicate_message_id",
                f"Message {message_id} is already queued or running in this session.",
                message_id=message_id,
            )

    def _find_pending(self, message_id: str) -> PendingItem:
        for item in self.pending:
            if item.request.message_id == message_id:
                return item
        raise InputError(
            "no_longer_pending", f"Message {message_id} is no longer pending.", message_id=message_id
        )

    def _ack(self, item: PendingItem, status: str) -> dict[str, Any]:
        ack: dict[str, Any] = {"message_id": item.request.message_id, "status": status}
        if status in {"queued", "restored"}:
            ack["position"] = self.pending.index(item)
        return ack

    def _announce(self, item: PendingItem, status: str) -> dict[str, Any]:
        """Publish a message_status event for `item` and return the matching ack."""
        ack = self._ack(item, status)
        self._emit({"type": "message_status", **ack})
        return ack

    async def _steer_into_turn(self, item: PendingItem, *, fresh: bool) -> dict[str, Any]:
        """Steer a pending item into the active turn; defer it while the turn has no stream yet.

        `fresh` means the item was just submitted, so staying in the queue is news (`queued`).
        """
        stream = self.active_stream
        if stream is None:
            item.steer_requested = True
            await self._save(item, "pending")
            return self._announce(item, "queued") if fresh else self._ack(item, "queued")
        try:
            stream.steer(item.request.content)
        except StreamClosed:
            if fresh:
                await self._save(item, "pending")
                return self._announce(item, "queued")
            return self._ack(item, "queued")
        self.pending.remove(item)
        item.steer_requested = False
        self._steered.append(item)  # before any await: the turn may end and count it
        await self._save(item, "steered")
        return self._announce(item, "steered")

    def _cancel_active_turn(self) -> bool:
        """Cancel the active task if it is still cancellable; True when it was."""
        task = self.active_task
        if task is None or not self._cancellable:
            return False
        self._cancel_requested = True
        self._cancellable = False
        task.cancel()
        return True

    async def _settle(self, task: asyncio.Task[None]) -> None:
        """Wait for a cancelled turn task to end (without cancelling it again) and make sure it finished.

        A task cancelled before its first step never runs its body, so its finish is done here.
        """
        await asyncio.wait([task])
        item = self._active_item
        if self.active_task is task and item is not None:
            async with self._lock:
                if self.active_task is task:
                    await self._finish(item, "cancelled", None)

    # ------------------------------------------------------------------ turn lifecycle

    async def _start(self, item: PendingItem, *, unpause: bool) -> None:
        """Make `item` the active turn (lock held); its task starts streaming once it gets a lease."""
        prepare = getattr(self._runtime, "prepare", None)
        if prepare is not None:
            prepare(item.request, session_id=self.session_id)
        await self._save(item, "running")
        if unpause and self.paused:
            await self._set_paused(False)
        self.active_request = item.request
        self._active_item = item
        self._steered = []
        self._unconsumed = 0
        self._cancellable = True
        self._cancel_requested = False
        self.active_task = asyncio.create_task(
            self._run_turn(item), name=f"turn:{self.session_id}:{item.request.message_id}"
        )
        if self.on_turn_change is not None:
            self.on_turn_change(1)
        self._emit({"type": "message_status", "message_id": item.request.message_id, "status": "started"})

    async def _start_head_if_idle(self) -> None:
        if self.active_task is None and self.pending and not self.paused and not self.closed:
            await self._start(self.pending.pop(0), unpause=False)

    async def _run_turn(self, item: PendingItem) -> None:
        outcome, result = await self._outcome_of(item)
        try:
            async with self._lock:
                await self._finish(item, outcome, result)
        except Exception:
            logger.exception("Finishing the turn of message %s failed", item.request.message_id)
            self._abandon_turn()

    async def _outcome_of(self, item: PendingItem) -> tuple[TurnOutcome, TurnResult | None]:
        """Run the turn; a requested cancel and any exception become an outcome, never a crash."""
        try:
            result = await self._drive(item)
        except asyncio.CancelledError:
            if not self._cancel_requested:
                self._abandon_turn()
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return "cancelled", None
        except Exception:
            logger.exception(
                "Turn of message %s in session %s failed", item.request.message_id, self.session_id
            )
            return "error", TurnResult(status="error", error=dict(INTERNAL_ERROR))
        return ("completed" if result.status == "completed" else "error"), result

    async def _drive(self, item: PendingItem) -> TurnResult:
        """Inside a lease: open the stream, apply deferred steers, forward its events, get its result."""
        async with self._lease():
            opened = self._runtime.stream(item.request, session_id=self.session_id)
            # A runtime may need I/O (history, settings) before the turn exists: it can return an awaitable.
            stream = await opened if inspect.isawaitable(opened) else opened
            try:
                async with self._lock:
                    self.active_stream = stream
                    await self._apply_deferred_steers(stream)
                async for event in stream:
                    self._forward(item, event)
                return await stream.result()
            finally:
                self._cancellable = False
                await self._close_stream(stream)

    async def _close_stream(self, stream: TurnStream) -> None:
        """Note what the turn never consumed (this closes its input), then always await aclose()."""
        try:
            self._unconsumed = len(stream.take_pending())
        except Exception:
            logger.exception("take_pending failed in session %s", self.session_id)
        try:
            await stream.aclose()
        except Exception:
            logger.exception("Closing the turn stream failed in session %s", self.session_id)

    async def _apply_deferred_steers(self, stream: TurnStream) -> None:
        for item in [item for item in self.pending if item.steer_requested]:
            item.steer_requested = False
            try:
                stream.steer(item.request.content)
            except StreamClosed:
                await self._save(item, "pending")
                continue
            self.pending.remove(item)
            self._steered.append(item)
            await self._save(item, "steered")
            self._announce(item, "steered")

    def _forward(self, item: PendingItem, event: dict[str, Any]) -> None:
        """Publish a stream event: turn events get the user message id; confirmations are tracked."""
        kind = event.get("type")
        if kind == "confirmation_request":
            data = event.get("data") or {}
            if "confirmation_id" in data:
                self._confirmations[data["confirmation_id"]] = data
            self._emit(dict(event))
        elif kind == "confirmation_resolved":
            self._mark_resolved(event.get("confirmation_id"))
            self._emit(dict(event))
        elif item.request.stream_events or kind not in _STREAM_ONLY_EVENTS:
            self._emit({**event, "message_id": item.request.message_id})

    def _mark_resolved(self, confirmation_id: Any) -> None:
        self._confirmations.pop(confirmation_id, None)
        self._resolved[confirmation_id] = None
        while len(self._resolved) > _RESOLVED_MEMORY:
            del self._resolved[next(iter(self._resolved))]

    async def _finish(self, item: PendingItem, outcome: TurnOutcome, result: TurnResult | None) -> None:
        """Store and publish how the turn ended, restore unconsumed steers, then start the next one."""
        steered, self._steered = self._steered, []
        cut = max(0, len(steered) - self._unconsumed)  # consumption is FIFO: the last ones are unseen
        consumed, restored = steered[:cut], sorted(steered[cut:], key=_order_key)
        await self._save(item, outcome)
        for done in consumed:
            await self._save(done, outcome)
        for back in restored:
            bisect.insort(self.pending, back, key=_order_key)
            await self._save(back, "pending")
        if outcome != "completed":
            await self._forget_deferred_steers()
            if not self.paused:
                await self._set_paused(True)
        self._clear_active()
        for back in restored:
            self._announce(back, "restored")
        self._emit_result(item.request.message_id, outcome, result)
        await self._start_head_if_idle()

    async def _forget_deferred_steers(self) -> None:
        for pending in self.pending:
            if pending.steer_requested:
                pending.steer_requested = False
                await self._save(pending, "pending")

    def _clear_active(self) -> None:
        # A confirmation still open when its turn ends (cancel, close, failure) is over: every
        # subscriber is told, so dialogs close and snapshots stay true.
        for confirmation_id in list(self._confirmations):
            self._mark_resolved(confirmation_id)
            self._emit(
                {
                    "type": "confirmation_resolved",
                    "confirmation_id": confirmation_id,
                    "approved": False,
                    "by": "cancel",
                }
            )
        had_task = self.active_task is not None
        self.active_request = None
        self._active_item = None
        self.active_stream = None
        self.active_task = None
        self._cancellable = False
        if had_task and self.on_turn_change is not None:
            self.on_turn_change(-1)

    def _abandon_turn(self) -> None:
        """Last resort when a turn cannot finish normally: forget it so the session is not stuck."""
        if self.active_task is asyncio.current_task():
            self._steered = []
            self._clear_active()

    def _emit_result(self, message_id: str, outcome: TurnOutcome, result: TurnResult | None) -> None:
        if outcome == "cancelled" or result is None:
            self._emit({"type": "result", "message_id": message_id, "data": {"status": "cancelled"}})
            return
        if outcome == "completed":
            self._emit(
                {
                    "type": "final_answer",
                    "message_id": message_id,
                    "content": result.final_content,
                    "is_final": True,
                }
            )
            data: dict[str, Any] = {
                "status": "completed",
                "final_content": result.final_content,
                "stop_reason": result.stop_reason,
                "usage": result.usage,
            }
        else:
            data = {"status": "error", "error": result.error or dict(INTERNAL_ERROR)}
            if result.final_content:
                data["final_content"] = result.final_content
            if result.stop_reason is not None:
                data["stop_reason"] = result.stop_reason
            if result.usage is not None:
                data["usage"] = result.usage
        self._emit({"type": "result", "message_id": message_id, "data": data})

    # ------------------------------------------------------------------ persistence and publishing

    async def _save(self, item: PendingItem, status: str) -> None:
        if self._store is not None:
            await self._store.save_message(item, status=status)

    async def _set_paused(self, paused: bool) -> None:
        if self._store is not None:
            await self._store.save_paused(paused)
        self.paused = paused

    def _emit(self, event: dict[str, Any]) -> None:
        """Number the event (publish) and deliver it to every local subscriber directly."""
        if self._sealed:
            return
        published = self._publish(event)
        for queue in self._subscribers:
            queue.put_nowait(published)
