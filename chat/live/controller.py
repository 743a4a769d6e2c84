"""One chat session's queue: pending messages, the active turn, steering, cancel, pause, subscribers.

This is the one place that knows the queue semantics of docs/protocol.md §3.4. It is plain asyncio
(no Django): the turn is reached only through the `TurnStream` interface, persistence through an
injected `QueueStore` and event numbering through an injected `publish` callable, so every rule here
is unit-testable with a scripted stream and no database.

Concurrency model: one `asyncio.Lock` serialises every state change that awaits the store (commands
and the start/end of a turn). A turn runs in its own task; only that task moves the session from
"turn running" to "idle" or "next turn started", so each `result` is published before the next
`started`. `cancel()`/`close()` never await the task while holding the lock.

The class has three parts: the commands, what subscribers see, and how turns run (a slot of the session's
user first, then the lease, the stream, the outcome, then the next one).
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any

from agents.contract import ChatRequest, InputError, Runtime, StreamClosed, TurnEvent, TurnResult, TurnStream
from chat.live.active import ActiveTurn, close_stream
from chat.live.confirmations import Confirmations
from chat.live.events import Signal, SubscriberQueue
from chat.live.outcomes import TurnOutcome, failed_outcome, result_error, result_events
from chat.live.queue import (
    Audience,
    Lease,
    PendingItem,
    Publish,
    QueueStore,
    find_pending,
    order_key,
    pending_snapshot,
)
from chat.live.slots import FREE, Slot, UserGate, fair_share_wait
from chat.statuses import MessageStatus

logger = logging.getLogger(__name__)

# Not published for a message with ChatRequest.stream_events=False (cron dispatch mode "final").
_STREAM_ONLY_EVENTS = frozenset({"delta", "thinking", "tool_call", "tool_result", "delegate_update"})


class SessionController:
    """The pending queue, active turn and subscribers of one live session (docs/protocol.md §3.4)."""

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
        user_id: int | None = None,
        gate: UserGate | None = None,
        token: int | None = None,
    ) -> None:
        self.session_id = session_id
        # Several processes: the fencing token this one owns the session with. The store fences the queue's
        # writes with it, and each turn gets it for its own (chat/store.py Fence).
        self.token = token
        self.user_id = user_id  # whose session it is (their turns stop when their account ends)
        self._runtime = runtime
        self._lease = lease
        self._store = store
        self._audience = Audience(publish)
        self.on_turn_change = on_turn_change  # public: the service attaches its counter when unset
        self.pending: list[PendingItem] = sorted(pending, key=order_key)
        # Every message this controller has held (loaded, submitted, adopted, interrupted): a stored message
        # handed over again (the receiving process's Submit after a load or an adoption took it) is a repeat.
        self._held = {item.request.message_id for item in self.pending}
        for item in self.pending:
            item.steer_requested = False  # deferred steers belonged to a turn that no longer exists
        self._next_order = max(next_order, max((i.order + 1 for i in self.pending), default=0))
        self.paused = paused
        self.closed = False
        self._turn: ActiveTurn | None = None
        self._confirmations = Confirmations()
        self._lock = asyncio.Lock()
        self._close_done: asyncio.Event | None = None
        self._gate = gate  # the user's turn slots (chat/live/slots.py); None: no per-user limit
        self._send_now: str | None = None  # "send now" of a message that waits for a slot: it goes first
        self._slot_refused = False  # the last ask for a slot found none (waiting_for)

    # ------------------------------------------------------------------ commands

    async def submit(
        self, request: ChatRequest, *, steer: bool = False, stored: bool = False
    ) -> dict[str, Any]:
        """Queue a message; start it when idle (and not paused, unless `steer` = "send now").

        Its first save claims its id (a duplicate is refused before anything changes), unless `stored`:
        the process that received it wrote its row already. A stored message this controller holds or held
        already (loaded with the queue, adopted) is a repeat: acknowledged, it changes nothing."""
        async with self._lock:
            self._check_open(request.message_id)
            if stored and request.message_id in self._held:
                return self._repeat(request.message_id)
            item = PendingItem(request=request, order=self._next_order)
            if self.active_task is None and (steer or (not self.paused and not self.pending)):
                slot = await self._slot()
                if slot is not None:
                    await self._start(item, slot, unpause=steer, new=not stored)
                    self._held.add(request.message_id)
                    self._next_order += 1
                    return self._ack(item, "started")
            await self._save(item, MessageStatus.PENDING, new=not stored)
            self._held.add(request.message_id)  # once stored: a refused duplicate is not this queue's
            self._next_order += 1
            bisect.insort(self.pending, item, key=order_key)
            if steer and self.active_task is None:  # its user's turn slots are all taken: first in line
                await self._first_in_line(item)
                return self._announce(item, "queued")
            if steer:
                return await self._steer_into_turn(item, fresh=True)
            ack = self._announce(item, "queued")
            await self._start_head_if_idle()
            return ack

    async def steer(self, message_id: str) -> dict[str, Any]:
        """Hand a pending message to the running turn, or start it at once when idle ("send now")."""
        async with self._lock:
            self._check_open(message_id)
            item = find_pending(self.pending, message_id)
            if self.active_task is None:
                slot = await self._slot()
                if slot is None:  # said to every socket: the queue goes on, this one first, and why it waits
                    await self._first_in_line(item)
                    return self._announce(item, "queued")
                self.pending.remove(item)
                await self._start(item, slot, unpause=True)
                return self._ack(item, "started")
            return await self._steer_into_turn(item, fresh=False)

    async def remove(self, message_id: str) -> dict[str, Any]:
        """Drop a pending message."""
        async with self._lock:
            self._check_open(message_id)
            item = find_pending(self.pending, message_id)
            await self._save(item, MessageStatus.REMOVED)
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
            cancelled_turn = self._turn is not None and self._turn.cancel()
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
        return self._confirmations.answer(self.active_stream, confirmation_id, approved, option_id)

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
                if self._turn is not None:
                    self._turn.cancel()
            if task is not None:
                await self._settle(task)
            async with self._lock:
                for item in self.pending:
                    await self._save(item, MessageStatus.CLOSED)
                self.pending.clear()
                self._audience.seal()
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
            self._held.add(message_id)
            placeholder = PendingItem(request=ChatRequest(message_id=message_id, content=""), order=-1)
            await self._save(placeholder, MessageStatus.INTERRUPTED)
            await self._set_paused(True)
            self._emit({"type": "result", "message_id": message_id, "data": {"status": "interrupted"}})

    def announce(self, event: dict[str, Any]) -> None:
        """Publish an event that no turn produced, e.g. the assistant message a cron text job adds
        (cron/runner.py): numbered and delivered like every other event; ignored once the session closed."""
        self._emit(dict(event))

    async def adopt(self, stored: Sequence[ChatRequest]) -> None:
        """Messages stored for this session while its owner could not be reached (the process that received
        them found no owner, or the hand-over was lost): queued here, in order, unless this controller holds
        or held them already. The database is the truth (docs/architecture.md)."""
        for request in stored:
            if request.message_id not in self._held and not self.closed:
                await self.submit(request, stored=True)

    async def kick(self) -> None:
        """Start the head of the queue if nothing runs and the queue is not paused (after a takeover
        finds messages that were stored while the session had no owner)."""
        async with self._lock:
            if not self.closed:
                await self._start_head_if_idle()

    async def abandon(self, notice: Signal | None = None) -> None:
        """Stop the turn and forget everything without storing or publishing anything more: this process
        lost the session to another owner (fencing), or a service it depends on failed. The stored state
        is the truth. `notice` goes to every subscriber first (chat/live/events.py Signal.UNAVAILABLE)."""
        self.silence(notice)
        await self.close()

    def silence(self, notice: Signal | None = None) -> None:
        """From now on store and publish nothing (abandon's first step, at once); `notice` to subscribers."""
        self._store = None
        self._audience.silence(notice)

    # ------------------------------------------------------------------ subscribers

    def subscribe(self) -> tuple[SubscriberQueue, dict[str, Any]]:
        """A queue of every later event plus the state it starts from (taken atomically)."""
        return self._audience.add(), self.snapshot()

    def unsubscribe(self, queue: SubscriberQueue) -> None:
        self._audience.remove(queue)

    @property
    def idle(self) -> bool:
        """Nothing runs, nothing waits, nobody listens: the controller can be dropped and reloaded later."""
        return self.active_task is None and not (self.pending or self._audience.subscribers or self.closed)

    def snapshot(self) -> dict[str, Any]:
        """docs/protocol.md §3.3 SNAPSHOT; `waiting_for` only while the queue waits for a turn slot (§6.4
        extension)."""
        snapshot: dict[str, Any] = {
            "running": self.active_task is not None,
            "paused": self.paused,
            "active_message_id": self.active_request.message_id if self.active_request else None,
            "pending": pending_snapshot(self.pending),
            "confirmations": self._confirmations.snapshot(),
        }
        if (waiting := self.waiting_for) is not None:
            snapshot["waiting_for"] = waiting
        return snapshot

    # ------------------------------------------------------------------ command helpers

    def _repeat(self, message_id: str) -> dict[str, Any]:
        """The ack of a message this controller already holds (or held): where it is now."""
        for item in self.pending:
            if item.request.message_id == message_id:
                return self._ack(item, "queued")
        if self.active_request is not None and self.active_request.message_id == message_id:
            return {"message_id": message_id, "status": "started"}
        steered = self._turn is not None and any(
            i.request.message_id == message_id for i in self._turn.steered
        )
        return {"message_id": message_id, "status": "steered" if steered else "queued"}

    def _check_open(self, message_id: str | None) -> None:
        if self.closed:
            raise InputError("session_closed", f"Session {self.session_id} is closed.", message_id=message_id)

    async def _steer_into_turn(self, item: PendingItem, *, fresh: bool) -> dict[str, Any]:
        """Steer a pending item into the active turn; defer it while the turn has no stream yet.

        `fresh` means the item was just submitted, so staying in the queue is news (`queued`).
        """
        stream = self.active_stream
        if stream is None:
            item.steer_requested = True
            await self._save(item, MessageStatus.PENDING)
            return self._announce(item, "queued") if fresh else self._ack(item, "queued")
        try:
            stream.steer(item.request.content)
        except StreamClosed:
            if fresh:
                await self._save(item, MessageStatus.PENDING)
                return self._announce(item, "queued")
            return self._ack(item, "queued")
        self.pending.remove(item)
        item.steer_requested = False
        assert self._turn is not None
        self._turn.steered.append(item)  # before any await: the turn may end and count it
        await self._save(item, MessageStatus.STEERED)
        return self._announce(item, "steered")

    # ------------------------------------------------------------------ turn state

    @property
    def active_request(self) -> ChatRequest | None:
        return self._turn.item.request if self._turn is not None else None

    @property
    def active_stream(self) -> TurnStream | None:
        return self._turn.stream if self._turn is not None else None

    @property
    def active_task(self) -> asyncio.Task[None] | None:
        return self._turn.task if self._turn is not None else None

    @property
    def waiting_for(self) -> dict[str, Any] | None:
        """Why the queue waits while nothing runs in this session and it is not paused: its user's turn
        slots are all taken (docs/protocol.md §6.4 extension). None otherwise."""
        if not self._slot_refused or self._gate is None or self.active_task is not None:
            return None
        if self.paused or self.closed or not self.pending:
            return None
        return fair_share_wait(self._gate.limit)

    def _ack(self, item: PendingItem, status: str) -> dict[str, Any]:
        ack: dict[str, Any] = {"message_id": item.request.message_id, "status": status}
        if status in {"queued", "restored"}:
            ack["position"] = self.pending.index(item)
            if status == "queued" and (waiting := self.waiting_for) is not None:
                ack["waiting_for"] = waiting
        return ack

    def _announce(self, item: PendingItem, status: str) -> dict[str, Any]:
        """Publish a message_status event for `item` and return the matching ack. A queued or restored
        message's event carries its text, so that the session's other sockets can show it (extension)."""
        ack = self._ack(item, status)
        event = {"type": "message_status", **ack}
        if status in {"queued", "restored"}:
            event["content"] = item.request.content
        self._emit(event)
        return ack

    async def _settle(self, task: asyncio.Task[None]) -> None:
        """Wait for a cancelled turn task to end (without cancelling it again) and make sure it finished.

        A task cancelled before its first step never runs its body, so its finish is done here.
        """
        await asyncio.wait([task])
        if self.active_task is task:
            async with self._lock:
                turn = self._turn
                if turn is not None and turn.task is task:
                    await self._finish(turn, "cancelled", None)

    # ------------------------------------------------------------------ turn lifecycle

    async def _slot(self) -> Slot | None:
        """A turn slot of the session's user, or None: the controller is woken (kick) when one may be free."""
        if self._gate is None:
            return FREE
        slot = await self._gate.take(self.kick)
        self._slot_refused = slot is None
        return slot

    async def _first_in_line(self, item: PendingItem) -> None:
        """ "Send now" while the user's slots are all taken: the queue goes on, and `item` starts first."""
        self._send_now = item.request.message_id
        if self.paused:
            await self._set_paused(False)

    async def _start(self, item: PendingItem, slot: Slot, *, unpause: bool, new: bool = False) -> None:
        """Make `item` the active turn (lock held); its task starts streaming once it gets a lease.

        The runtime is entered here, once: the I/O of opening the turn runs alongside the write below."""
        turn = ActiveTurn(
            item,
            slot=slot,
            opening=self._runtime.stream(item.request, session_id=self.session_id, token=self.token),
        )
        try:
            await self._save(item, MessageStatus.RUNNING, new=new)
        except BaseException:
            turn.discard_opening()
            slot.release()
            raise
        if unpause and self.paused:
            await self._set_paused(False)
        self._turn = turn
        turn.task = asyncio.create_task(
            self._run_turn(turn), name=f"turn:{self.session_id}:{item.request.message_id}"
        )
        if self.on_turn_change is not None:
            self.on_turn_change(1)
        self._emit({"type": "message_status", "message_id": item.request.message_id, "status": "started"})

    async def _start_head_if_idle(self) -> None:
        if self.active_task is None and self.pending and not self.paused and not self.closed:
            said = self.waiting_for is not None
            slot = await self._slot()
            chosen = [item for item in self.pending if item.request.message_id == self._send_now]
            head = chosen[0] if chosen else self.pending[0]
            if slot is None:
                if not said:  # it waited behind this session's turn; now for a slot: say so, once
                    self._announce(head, "queued")
                return
            self._send_now = None
            self.pending.remove(head)
            await self._start(head, slot, unpause=False)

    async def _run_turn(self, turn: ActiveTurn) -> None:
        ended = await self._outcome_of(turn)
        if ended is None:  # the storage failed: the session's live state is being dropped, nothing is written
            self._abandon_turn()
            return
        outcome, result = ended
        try:
            async with self._lock:
                await self._finish(turn, outcome, result)
        except Exception:
            logger.exception("Finishing the turn of message %s failed", turn.item.request.message_id)
            self._abandon_turn()

    async def _outcome_of(self, turn: ActiveTurn) -> tuple[TurnOutcome, TurnResult | None] | None:
        """Run the turn; a requested cancel and any exception become an outcome, never a crash. None when
        the store's storage failed (the store has the session's live state dropped), or the session's live
        state here was let go while the turn ran (silence)."""
        item = turn.item
        try:
            result = await self._drive(turn)
        except asyncio.CancelledError:
            if not turn.cancel_requested:
                self._abandon_turn()
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return "cancelled", None
        except Exception as exc:
            if self._audience.silenced:  # let go meanwhile (e.g. its last write was fenced): nothing to tell
                return None
            return failed_outcome(exc, self._store, item.request.message_id, self.session_id)
        return ("completed" if result.status == "completed" else "error"), result

    async def _drive(self, turn: ActiveTurn) -> TurnResult:
        """Inside a lease: open the stream, apply deferred steers, forward its events, get its result."""
        item = turn.item
        async with self._lease():
            opened, turn.opening = turn.opening, None
            # A runtime may need I/O (history, settings) before the turn exists: it can return an awaitable.
            stream = await opened if inspect.isawaitable(opened) else opened
            assert stream is not None
            try:
                async with self._lock:
                    turn.stream = stream
                    await self._apply_deferred_steers(turn)
                async for event in stream:
                    self._forward(item, event)
                return await stream.result()
            finally:
                turn.cancellable = False
                await close_stream(turn, stream, self.session_id)

    async def _apply_deferred_steers(self, turn: ActiveTurn) -> None:
        assert turn.stream is not None
        for item in [item for item in self.pending if item.steer_requested]:
            item.steer_requested = False
            try:
                turn.stream.steer(item.request.content)
            except StreamClosed:
                await self._save(item, MessageStatus.PENDING)
                continue
            self.pending.remove(item)
            turn.steered.append(item)
            await self._save(item, MessageStatus.STEERED)
            self._announce(item, "steered")

    def _forward(self, item: PendingItem, event: TurnEvent) -> None:
        """Publish a stream event: turn events get the user message id; confirmations are tracked."""
        kind = event.get("type")
        if kind in ("confirmation_request", "confirmation_resolved"):
            self._confirmations.track(event)
            self._emit(dict(event))
        elif item.request.stream_events or kind not in _STREAM_ONLY_EVENTS:
            self._emit({**event, "message_id": item.request.message_id})

    async def _finish(self, turn: ActiveTurn, outcome: TurnOutcome, result: TurnResult | None) -> None:
        """Store and publish how the turn ended, restore unconsumed steers, then start the next one."""
        item = turn.item
        consumed, restored = turn.consumed_and_restored()
        turn.steered = []
        error = result_error(outcome, result)
        status = MessageStatus(outcome)  # the same words
        await self._save(item, status, error=error)
        for done in consumed:
            await self._save(done, status, error=error)
        for back in restored:
            bisect.insort(self.pending, back, key=order_key)
            await self._save(back, MessageStatus.PENDING)
        if outcome != "completed":  # the queue pauses; deferred steers are forgotten
            for pending in [pending for pending in self.pending if pending.steer_requested]:
                pending.steer_requested = False
                await self._save(pending, MessageStatus.PENDING)
            if not self.paused:
                await self._set_paused(True)
        self._clear_active()
        for back in restored:
            self._announce(back, "restored")
        for event in result_events(item.request.message_id, outcome, result):
            self._emit(event)
        await self._start_head_if_idle()

    def _clear_active(self) -> None:
        for event in self._confirmations.end_all():
            self._emit(event)
        turn, self._turn = self._turn, None
        if turn is not None:
            turn.discard_opening()
            turn.slot.release()
            if self.on_turn_change is not None:
                self.on_turn_change(-1)

    def _abandon_turn(self) -> None:
        """Last resort when a turn cannot finish normally: forget it so the session is not stuck."""
        if self.active_task is asyncio.current_task():
            self._clear_active()

    # ------------------------------------------------------------------ persistence and publishing

    async def _save(
        self,
        item: PendingItem,
        status: MessageStatus,
        *,
        new: bool = False,
        error: dict[str, str] | None = None,
    ) -> None:
        if self._store is not None:
            await self._store.save_message(item, status=status, new=new, error=error)

    async def _set_paused(self, paused: bool) -> None:
        if self._store is not None:
            await self._store.save_paused(paused)
        self.paused = paused
        if paused:
            self._send_now = None

    def _emit(self, event: dict[str, Any]) -> None:
        self._audience.emit(event)
