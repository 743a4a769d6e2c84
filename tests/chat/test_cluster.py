"""Command routing and event mirroring between two process-level Clusters over a real Redis layer."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from channels_redis.pubsub import RedisPubSubChannelLayer

from chat.live.cluster.channel import Cluster, OwnerUnavailable, RemoteError


@pytest.fixture
async def layers(redis_client):  # type: ignore[no-untyped-def]
    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    made = [RedisPubSubChannelLayer(hosts=[{"address": url}]) for _ in range(2)]
    yield made
    for layer in made:
        await layer.flush()


async def _no_replay(session_id: str, since: int) -> list[dict[str, Any]] | None:
    return []


async def test_a_command_runs_on_the_owner_and_its_answer_or_error_comes_back(layers):
    calls: list[tuple[str, str, dict[str, Any]]] = []

    async def handle(session_id: str, op: str, payload: dict[str, Any]) -> Any:
        calls.append((session_id, op, payload))
        if op == "steer":
            raise RemoteError("no_longer_pending", "Message m is no longer pending.", "m")
        return {"ok": payload["n"] + 1}

    owner = Cluster(layer=layers[0], handle_command=handle, replay=_no_replay)
    other = Cluster(layer=layers[1], handle_command=handle, replay=_no_replay)
    await owner.start()
    await other.start()
    try:
        await asyncio.sleep(0.1)  # the listeners subscribe to their channels
        assert await other.call(owner.process_id, "s1", "submit", {"n": 1}) == {"ok": 2}
        with pytest.raises(RemoteError) as error:
            await other.call(owner.process_id, "s1", "steer", {})
        assert (error.value.code, error.value.message_id) == ("no_longer_pending", "m")
        assert calls[0] == ("s1", "submit", {"n": 1})
        with pytest.raises(OwnerUnavailable):
            await other.call("agentsite.proc.nobody", "s1", "submit", {"n": 1}, within=0.3)
    finally:
        await owner.stop()
        await other.stop()


async def test_mirrored_events_arrive_in_order_and_a_gap_is_refilled_from_the_replay_store(layers):
    stored: list[dict[str, Any]] = []

    async def replay(session_id: str, since: int) -> list[dict[str, Any]] | None:
        return [event for event in stored if event["seq"] > since]

    async def handle(session_id: str, op: str, payload: dict[str, Any]) -> Any:
        return None

    owner = Cluster(layer=layers[0], handle_command=handle, replay=replay)
    other = Cluster(layer=layers[1], handle_command=handle, replay=replay)
    await owner.start()
    await other.start()
    try:
        remote = await other.mirror("s1")
        queue = remote.subscribe()
        await asyncio.sleep(0.1)
        events = [{"type": "delta", "seq": seq, "content": str(seq)} for seq in range(11, 21)]
        stored.extend(events)
        await owner.relay("s1", events[:3])  # 11-13
        owner._relayed["s1"] = 16  # the batch with 14-16 was lost in transit
        await owner.relay("s1", events[6:])  # 17-20, prev = 16
        received = [await asyncio.wait_for(queue.get(), 2) for _ in range(10)]
        assert [event["seq"] for event in received] == list(range(11, 21))
        await owner.relay("s1", events[-1:])  # a duplicate is dropped
        await asyncio.sleep(0.1)
        assert queue.empty()
    finally:
        await owner.stop()
        await other.stop()
