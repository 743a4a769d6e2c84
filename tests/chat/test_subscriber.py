"""chat/live/subscriber.py: the one subscriber both the socket and the SSE stream use to follow a session:
what a client gets first, events it has already skipped by seq, slices, and how a stream ends."""

from __future__ import annotations

import json
from typing import Any

from agentsite.eventqueue import EventQueue
from chat.live import UNAVAILABLE, Attachment
from chat.live.events import QueueItem
from chat.live.subscriber import Subscriber


def subscriber(
    *, backlog: list[dict[str, Any]] | None, since: int | None = 3, last_seq: int = 5
) -> Subscriber:
    attachment = Attachment(
        session_id="s1",
        queue=EventQueue[QueueItem](),
        snapshot={"running": False},
        last_seq=last_seq,
        backlog=backlog,
        local=True,
        since=since,
    )
    return Subscriber(None, attachment)  # type: ignore[arg-type]  # the live sessions: only for detach


def delta(seq: int | None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "delta", "content": "x"}
    if seq is not None:
        event["seq"] = seq
    return event


def seqs(texts: list[str]) -> list[int | None]:
    return [json.loads(text).get("seq") for text in texts]


def test_a_client_gets_connected_then_what_it_missed_or_a_resync() -> None:
    missed = subscriber(backlog=[delta(4), delta(5)])
    assert [event["type"] for event in missed.opening()] == ["connected", "delta", "delta"]
    assert missed.opening()[0] == {
        "type": "connected",
        "session_id": "s1",
        "snapshot": {"running": False},
        "last_seq": 5,
    }
    gone = subscriber(backlog=None)
    assert [event["type"] for event in gone.opening()] == ["connected", "resync"]


async def test_events_the_client_has_are_skipped_and_a_burst_comes_in_slices() -> None:
    follower = subscriber(backlog=[delta(4), delta(5)])
    for seq in (4, 5, None, 6, 7, 8):  # 4 and 5 were in the replay; an unnumbered event always goes
        follower.queue.put_nowait(delta(seq))
    assert await follower.take(json.dumps, 3) == (
        [json.dumps(delta(None))],
        None,
    )  # three taken: 4, 5 (skipped) and the unnumbered one
    texts, end = await follower.take(json.dumps, 16)
    assert (seqs(texts), end) == ([6, 7, 8], None)
    assert await follower.take_within(0.01, json.dumps, 16) is None  # nothing came


async def test_each_end_comes_after_what_was_queued_before_it() -> None:
    for end, put in (
        ("unavailable", lambda s: s.queue.put_nowait(UNAVAILABLE)),
        ("closed", Subscriber.session_closed),
        ("unauthorized", lambda s: s.account_ended("The API key was revoked.")),
    ):
        follower = subscriber(backlog=[])
        follower.queue.put_nowait(delta(6))
        put(follower)
        follower.queue.put_nowait(delta(7))  # after the end: never sent
        texts, said = await follower.take(json.dumps, 16)
        assert (seqs(texts), said) == ([6], end)
    assert follower.reason == "The API key was revoked."
