"""Cross-process event relay: delta coalescing, ordering, and the Redis replay store."""

from __future__ import annotations

import asyncio
import uuid

from chat.live.cluster.keys import floor_key, owner_key, stream_key
from chat.live.cluster.ownership import Lease, RedisOwnership
from chat.live.cluster.relay import EventRelay, RedisReplayStore


def _delta(seq: int, text: str = "x") -> dict:  # type: ignore[type-arg]
    return {"type": "delta", "seq": seq, "message_id": "m", "content": text}


async def _owned(redis_client, sid: str, process: str = "test") -> Lease:  # type: ignore[no-untyped-def]
    """The session's lease, as its owner process takes it (only the owner appends to the replay stream)."""
    lease = await RedisOwnership(redis_client, process_id=process).acquire(sid)
    assert lease is not None
    return lease


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
    lease = await _owned(redis_client, sid)
    try:
        await store.append(sid, [_delta(seq) for seq in range(1, 11)], lease=lease)
        replay = await store.since(sid, 7)
        assert [e["seq"] for e in replay] == [8, 9, 10]  # type: ignore[union-attr]
        assert await store.since(sid, 10) == []
        assert await store.last_seq(sid) == 10
        # A gap from a new owner's seq block is not a loss.
        await store.append(sid, [_delta(1011)], lease=lease)
        assert [e["seq"] for e in await store.since(sid, 10)] == [1011]  # type: ignore[union-attr]
        await store.append(sid, [_delta(seq) for seq in range(2000, 2400)], lease=lease)
        assert await store.since(sid, 3) is None  # trimmed: the client must resync
    finally:
        await store.delete(sid)
        await redis_client.delete(owner_key(sid))


async def test_only_the_sessions_owner_appends_to_its_replay_stream(redis_client):
    """Fenced by the lease in Redis, not by the appender's clock: a process whose lease expired (frozen,
    partitioned), or was taken over meanwhile, appends nothing, also when its events' seqs would fit."""
    sid = f"test-{uuid.uuid4().hex}"
    store = RedisReplayStore(redis_client, maxlen=50)
    old = await _owned(redis_client, sid, "old")
    try:
        assert await store.append(sid, [_delta(1)], lease=old) is True
        await redis_client.delete(owner_key(sid))  # the old owner's lease expired
        assert await store.append(sid, [_delta(2)], lease=old) is False
        new = await _owned(redis_client, sid, "new")  # another process took the session over
        assert new.token > old.token
        assert await store.append(sid, [_delta(3)], lease=old) is False
        assert await store.append(sid, [_delta(1001)], lease=new) is True
        assert [e["seq"] for e in await store.since(sid, 0)] == [1, 1001]  # type: ignore[union-attr]
    finally:
        await store.delete(sid)
        await redis_client.delete(owner_key(sid))


async def test_a_since_from_before_events_redis_lost_gets_a_resync_never_a_replay_with_a_hole(redis_client):
    """Redis restarted without its data (or let an idle session's stream expire): the stream that starts
    again knows where it starts, and a client that saw less than that must resync."""
    sid = f"test-{uuid.uuid4().hex}"
    store = RedisReplayStore(redis_client, maxlen=50)
    lease = await _owned(redis_client, sid)
    try:
        assert await store.since(sid, 5) is None  # nothing known of the session at all
        await store.append(sid, [_delta(seq) for seq in range(1, 11)], lease=lease)
        assert [e["seq"] for e in await store.since(sid, 0)] == list(range(1, 11))  # type: ignore[union-attr]
        await redis_client.delete(stream_key(sid), floor_key(sid))  # the loss
        await store.append(sid, [_delta(seq) for seq in range(1001, 1004)], lease=lease)
        assert await store.since(sid, 7) is None  # 8..10 are gone: no silent hole
        assert [e["seq"] for e in await store.since(sid, 1000)] == [1001, 1002, 1003]  # type: ignore[union-attr]
        assert await store.since(sid, 1003) == []

        # A stream written before floors were kept counts from 0, as it did.
        await redis_client.delete(floor_key(sid))
        assert [e["seq"] for e in await store.since(sid, 7)] == [1001, 1002, 1003]  # type: ignore[union-attr]
    finally:
        await store.delete(sid)
        await redis_client.delete(owner_key(sid))
