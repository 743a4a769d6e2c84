"""Cross-process event relay: delta coalescing, ordering, and the Redis replay store."""

from __future__ import annotations

import asyncio
import uuid

from chat.live.cluster.keys import floor_key, stream_key
from chat.live.cluster.relay import EventRelay, RedisReplayStore


def _delta(seq: int, text: str = "x") -> dict:  # type: ignore[type-arg]
    return {"type": "delta", "seq": seq, "message_id": "m", "content": text}


async def test_consecutive_deltas_travel_as_one_batch_and_control_events_flush_at_once():
    sent: list[list[dict]] = []  # type: ignore[type-arg]

    async def send(batch):  # type: ignore[no-untyped-def]
        sent.append(batch)

    relay = EventRelay(send, window=0.05)
    for seq in range(1, 11):
        relay.add(_delta(seq))
    await asyncio.sleep(0)
    assert sent == []  # still inside the window
    relay.add({"type": "result", "seq": 11, "data": {"status": "completed"}})
    await asyncio.sleep(0.01)
    assert len(sent) == 1
    assert [event["seq"] for event in sent[0]] == list(range(1, 12))
    await relay.aclose()


async def test_the_window_flushes_a_lone_delta_and_size_bounds_a_batch():
    sent: list[list[dict]] = []  # type: ignore[type-arg]

    async def send(batch):  # type: ignore[no-untyped-def]
        sent.append(batch)

    relay = EventRelay(send, window=0.01, max_bytes=1000)
    relay.add(_delta(1))
    await asyncio.sleep(0.05)
    assert [[e["seq"] for e in batch] for batch in sent] == [[1]]
    for seq in range(2, 12):
        relay.add(_delta(seq, "y" * 200))
    await asyncio.sleep(0.05)
    assert all(len(batch) <= 4 for batch in sent[1:])
    assert [e["seq"] for batch in sent for e in batch] == list(range(1, 12))
    await relay.aclose()


async def test_a_failing_send_does_not_stop_later_batches():
    sent: list[int] = []
    calls = 0

    async def send(batch):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("redis went away")
        sent.extend(e["seq"] for e in batch)

    relay = EventRelay(send, window=0.001)
    relay.add({"type": "message_status", "seq": 1})
    relay.add({"type": "message_status", "seq": 2})
    await relay.aclose()
    assert sent == [2]


async def test_replay_store_returns_events_after_a_seq_and_detects_trimming(redis_client):
    sid = f"test-{uuid.uuid4().hex}"
    store = RedisReplayStore(redis_client, maxlen=50)
    try:
        await store.append(sid, [_delta(seq) for seq in range(1, 11)])
        replay = await store.since(sid, 7)
        assert [e["seq"] for e in replay] == [8, 9, 10]  # type: ignore[union-attr]
        assert await store.since(sid, 10) == []
        assert await store.last_seq(sid) == 10
        # A gap from a new owner's seq block is not a loss.
        await store.append(sid, [_delta(1011)])
        assert [e["seq"] for e in await store.since(sid, 10)] == [1011]  # type: ignore[union-attr]
        await store.append(sid, [_delta(seq) for seq in range(2000, 2400)])
        assert await store.since(sid, 3) is None  # trimmed: the client must resync
    finally:
        await store.delete(sid)


async def test_a_since_from_before_events_redis_lost_gets_a_resync_never_a_replay_with_a_hole(redis_client):
    """Redis restarted without its data (or let an idle session's stream expire): the stream that starts
    again knows where it starts, and a client that saw less than that must resync."""
    sid = f"test-{uuid.uuid4().hex}"
    store = RedisReplayStore(redis_client, maxlen=50)
    try:
        assert await store.since(sid, 5) is None  # nothing known of the session at all
        await store.append(sid, [_delta(seq) for seq in range(1, 11)])
        assert [e["seq"] for e in await store.since(sid, 0)] == list(range(1, 11))  # type: ignore[union-attr]
        await redis_client.delete(stream_key(sid), floor_key(sid))  # the loss
        await store.append(sid, [_delta(seq) for seq in range(1001, 1004)])
        assert await store.since(sid, 7) is None  # 8..10 are gone: no silent hole
        assert [e["seq"] for e in await store.since(sid, 1000)] == [1001, 1002, 1003]  # type: ignore[union-attr]
        assert await store.since(sid, 1003) == []

        # A stream written before floors were kept counts from 0, as it did.
        await redis_client.delete(floor_key(sid))
        assert [e["seq"] for e in await store.since(sid, 7)] == [1001, 1002, 1003]  # type: ignore[union-attr]
    finally:
        await store.delete(sid)
