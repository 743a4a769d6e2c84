"""The pieces of a session's queue the controller is built from: pending items, the store it writes
through, the event numbering it publishes through, and the snapshot it shows (docs/protocol.md §3.3).
Plain asyncio: of Django only the enum type of the message statuses (chat/statuses.py)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from agents.contract import ChatRequest, InputError
from agentsite.eventqueue import EventQueue
from chat.live.events import Signal, SubscriberQueue
from chat.statuses import MessageStatus


@dataclass
class PendingItem:
    request: ChatRequest
    order: int  # submission ordinal within the session; restore puts items back by it
    steer_requested: bool = False  # a deferred steer: the turn has not started streaming yet


class QueueStore(Protocol):
    """Where the queue keeps its state. The first save of a message (`new=True`) claims its id: a store
    refuses an id the session already has with InputError `duplicate_message_id`, and nothing changes."""

    async def save_message(
        self,
        item: PendingItem,
        *,
        status: MessageStatus,
        new: bool = False,
        error: dict[str, str] | None = None,
    ) -> None:
        """`error`: the `{code, message}` a turn that ended `error` carried, kept with its message."""

    async def save_paused(self, paused: bool) -> None: ...
    def storage_failed(self, exc: BaseException) -> bool:
        """True when `exc` (raised by a turn) is this store's storage failing; the store then has the
        session's live state dropped (nothing more is written or published)."""
        ...


Publish = Callable[[dict[str, Any]], dict[str, Any]]
Lease = Callable[[], AbstractAsyncContextManager[Any]]


def counting_publish() -> Publish:
    """The default publish: seq 1, 2, 3... (the Django layer injects its EventLog instead)."""
    counter = itertools.count(1)

    def publish(event: dict[str, Any]) -> dict[str, Any]:
        event["seq"] = next(counter)
        return event

    return publish


def order_key(item: PendingItem) -> int:
    return item.order


def find_pending(pending: Sequence[PendingItem], message_id: str) -> PendingItem:
    """The pending item with that id; `no_longer_pending` when there is none (unknown, started, steered,
    removed, or another session's)."""
    for item in pending:
        if item.request.message_id == message_id:
            return item
    raise InputError(
        "no_longer_pending", f"Message {message_id} is no longer pending.", message_id=message_id
    )


def pending_snapshot(pending: Sequence[PendingItem]) -> list[dict[str, Any]]:
    return [
        {
            "message_id": item.request.message_id,
            "content": item.request.content,
            "position": position,
            "steer_requested": item.steer_requested,
        }
        for position, item in enumerate(pending)
    ]


class Audience:
    """Who hears a session's events: `emit` numbers an event (publish) and hands it to every subscriber's
    queue directly. Sealed once the session is closed: nothing more is published."""

    def __init__(self, publish: Publish | None = None) -> None:
        self.publish = publish or counting_publish()
        self.subscribers: list[SubscriberQueue] = []
        self.sealed = False
        self.silenced = False  # the session's live state here is let go (another process owns it, ...)

    def emit(self, event: dict[str, Any]) -> None:
        if self.sealed:
            return
        published = self.publish(event)
        for queue in self.subscribers:
            queue.put_nowait(published)

    def add(self) -> SubscriberQueue:
        queue: SubscriberQueue = EventQueue()
        if not self.sealed:
            self.subscribers.append(queue)
        return queue

    def remove(self, queue: SubscriberQueue) -> None:
        if queue in self.subscribers:
            self.subscribers.remove(queue)

    def seal(self) -> None:
        self.sealed = True
        self.subscribers.clear()

    def silence(self, notice: Signal | None = None) -> None:
        """Publish nothing any more, not even numbering; `notice` (not numbered) goes to subscribers first."""
        if notice is not None:
            for queue in self.subscribers:
                queue.put_nowait(notice)
        self.publish = lambda event: event
        self.subscribers.clear()
        self.silenced = True
