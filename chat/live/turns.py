"""The life of a session's turns: taking a turn slot, starting the head of the queue, running the turn
inside a lease, forwarding its events, and storing and publishing how it ended; then the next one.

The second half of chat/live/controller.py's SessionController (a mixin: the controller holds the state
declared below and the commands; this part runs its turns). Plain asyncio, no Django; the rules are those
of docs/protocol.md §3.4, the concurrency model is the one in the controller's docstring.
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from agents.contract import ChatRequest, Runtime, StreamClosed, TurnEvent, TurnResult, TurnStream
from chat.live.active import ActiveTurn, close_stream
from chat.live.confirmations import Confirmations
from chat.live.outcomes import TurnOutcome, failed_outcome, result_error, result_events
from chat.live.queue import Audience, Lease, PendingItem, QueueStore, order_key
from chat.live.slots import FREE, Slot, UserGate, fair_share_wait
from chat.statuses import MessageStatus

logger = logging.getLogger("chat.live.controller")

# Not published for a message with ChatRequest.stream_events=False (cron dispatch mode "final").
_STREAM_ONLY_EVENTS = frozenset({"delta", "thinking", "tool_call", "tool_result", "delegate_update"})


class Turns:
    """How a SessionController runs its turns (see the module docstring)."""

    session_id: str
    token: int | None
    pending: list[PendingItem]
    paused: bool
    closed: bool
    on_turn_change: Callable[[int], None] | None
    _runtime: Runtime
    _lease: Lease
    _store: QueueStore | None
    _audience: Audience
    _turn: ActiveTurn | None
    _confirmations: Confirmations
    _lock: asyncio.Lock
    _gate: UserGate | None
    _send_now: str | None
    _slot_refused: bool
    kick: Callable[
        [], Coroutine[Any, Any, None]
    ]  # the controller's: start the head if idle (a slot's wake-up)

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
        """Make `item` the active turn (lock held); its task starts streaming once it gets a lease."""
        prepare = getattr(self._runtime, "prepare", None)
        if prepare is not None:
            prepare(item.request, session_id=self.session_id)
        try:
            await self._save(item, MessageStatus.RUNNING, new=new)
        except BaseException:
            slot.release()
            raise
        if unpause and self.paused:
            await self._set_paused(False)
        turn = self._turn = ActiveTurn(item, slot=slot)
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
            opened = self._runtime.stream(item.request, session_id=self.session_id, token=self.token)
            # A runtime may need I/O (history, settings) before the turn exists: it can return an awaitable.
            stream = await opened if inspect.isawaitable(opened) else opened
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
