"""One subscriber of a live session's events, for both edges that stream them: the WebSocket
(chat/consumers.py) and Server-Sent Events (chat/api.py `EventStreamApi`).

It attaches to the session wherever it lives (chat/live/sessions.py `attach`), says what the client gets
first (`connected`, then `resync` or the events it missed), then hands over the session's events whose
seq is above what was sent (the snapshot and the replay may hold some already), and says how the stream
ends: the session cannot go on in this process (`unavailable`), it was deleted (`closed`), what the
client authenticated with ended (`unauthorized`). The edges encode, send, and tell the end their own way
(a close code, an `error` event).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Literal

from chat.live.events import Published, QueueItem, Signal, SubscriberQueue
from chat.live.sessions import Attachment, LiveSessions

End = Literal["unavailable", "closed", "unauthorized"]  # the code of the `error` the client is told


class Subscriber:
    """A socket's or SSE stream's subscription to one session (see the module docstring)."""

    __slots__ = ("_live", "attachment", "queue", "reason", "sent_seq", "session_id")

    def __init__(self, live: LiveSessions, attachment: Attachment) -> None:
        self._live = live
        self.session_id = attachment.session_id
        self.attachment = attachment
        self.queue: SubscriberQueue = attachment.queue
        self.sent_seq = attachment.position  # the client has every event through this seq
        self.reason = ""  # why its credential ended (accounts/credentials.py)

    @classmethod
    async def attach(cls, live: LiveSessions, session_id: str, since: int | None) -> Subscriber:
        """Subscribe (chat/live/sessions.py Unavailable when the session's owner does not answer)."""
        return cls(live, await live.attach(session_id, since))

    def opening(self) -> list[Published]:
        """What the client gets first: `connected` with the snapshot, then `resync` (the events it missed
        are gone) or those events."""
        attachment = self.attachment
        snapshot, last_seq = attachment.snapshot, attachment.last_seq
        first = [
            {"type": "connected", "session_id": self.session_id, "snapshot": snapshot, "last_seq": last_seq}
        ]
        if attachment.backlog is None:
            first.append({"type": "resync", "snapshot": snapshot, "last_seq": last_seq})
        else:
            first.extend(attachment.backlog)
        return first

    def session_closed(self) -> None:
        """The session was deleted: the stream ends `closed` after what was queued before."""
        self.queue.put_nowait(Signal.CLOSED)

    def account_ended(self, reason: str) -> None:
        """What the client authenticated with ended: the stream ends `unauthorized` (`reason`)."""
        self.reason = reason
        self.queue.put_nowait(Signal.ACCOUNT_ENDED)

    async def take(self, encode: Callable[[Published], str], limit: int) -> tuple[list[str], End | None]:
        """The events waiting, at least one and at most `limit`, encoded, without those the client has
        already; and how the stream ends when its end came (the events before it are sent first)."""
        return self._drain(await self.queue.get(), encode, limit)

    async def take_within(
        self, seconds: float, encode: Callable[[Published], str], limit: int
    ) -> tuple[list[str], End | None] | None:
        """`take`, or None when `seconds` pass without an event."""
        try:
            event = await asyncio.wait_for(self.queue.get(), seconds)
        except TimeoutError:
            return None
        return self._drain(event, encode, limit)

    def _drain(
        self, event: QueueItem, encode: Callable[[Published], str], limit: int
    ) -> tuple[list[str], End | None]:
        queue = self.queue
        texts: list[str] = []
        taken = 1
        while True:
            if event is Signal.UNAVAILABLE:
                return texts, "unavailable"
            if event is Signal.CLOSED:
                return texts, "closed"
            if event is Signal.ACCOUNT_ENDED:
                return texts, "unauthorized"
            seq = event.get("seq")
            if seq is None:
                texts.append(encode(event))
            elif seq > self.sent_seq:
                self.sent_seq = seq
                texts.append(encode(event))
            # else: already in the snapshot or the replay
            if taken >= limit or queue.empty():
                return texts, None
            event = queue.get_nowait()
            taken += 1

    async def detach(self) -> None:
        await self._live.detach(self.attachment)
