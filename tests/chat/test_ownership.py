"""Session ownership leases on a real Redis: one owner, renewal, expiry, fencing tokens that only grow."""

from __future__ import annotations

import uuid

from chat.live.cluster.keys import owner_key
from chat.live.cluster.ownership import RedisOwnership


def _sid() -> str:
    return f"test-{uuid.uuid4().hex}"


async def test_only_one_process_holds_a_session_and_tokens_grow(redis_client):
    one = RedisOwnership(redis_client, lease_ms=5000, process_id="one")
    two = RedisOwnership(redis_client, lease_ms=5000, process_id="two")
    sid = _sid()
    first = await one.acquire(sid)
    assert first is not None and first.owner == "one"
    assert await two.acquire(sid) is None
    assert (await two.owner_of(sid)) == first
    await one.release(sid)
    second = await two.acquire(sid)
    assert second is not None and second.token > first.token


async def test_a_lease_that_is_not_renewed_expires_and_the_old_owner_learns_it_lost(redis_client):
    now = [0.0]
    lost: list[str] = []

    async def on_lost(session_id: str) -> None:
        lost.append(session_id)

    one = RedisOwnership(redis_client, lease_ms=200, process_id="one", on_lost=on_lost, clock=lambda: now[0])
    two = RedisOwnership(redis_client, lease_ms=5000, process_id="two")
    sid = _sid()
    first = await one.acquire(sid)
    assert first is not None and one.holds(sid)
    now[0] = 0.25  # past the deadline by one's own clock: it must not act as owner any more
    assert not one.holds(sid)
    await redis_client.pexpire(owner_key(sid), 1)  # and Redis expired it too
    import asyncio

    await asyncio.sleep(0.01)
    second = await two.acquire(sid)
    assert second is not None and second.token > first.token
    assert await one.renew_all() == [sid]
    assert lost == [sid]
    assert not one.holds(sid)


async def test_renewal_keeps_the_lease(redis_client):
    now = [0.0]
    one = RedisOwnership(redis_client, lease_ms=1000, process_id="one", clock=lambda: now[0])
    sid = _sid()
    await one.acquire(sid)
    now[0] = 0.9
    assert await one.renew_all() == []
    now[0] = 1.5
    assert one.holds(sid)
    assert await redis_client.pttl(owner_key(sid)) > 0
    await one.stop()
    assert await redis_client.get(owner_key(sid)) is None


async def test_release_of_a_lease_someone_else_holds_does_nothing(redis_client):
    one = RedisOwnership(redis_client, lease_ms=5000, process_id="one")
    two = RedisOwnership(redis_client, lease_ms=5000, process_id="two")
    sid = _sid()
    await one.acquire(sid)
    await two.release(sid)
    assert (await two.owner_of(sid)).owner == "one"  # type: ignore[union-attr]
    await one.release(sid)


async def test_a_renewal_that_gets_no_answer_loses_the_lease_by_its_deadline(redis_client):
    """Redis slow or away: a lease whose renewal does not answer is lost when its deadline passes (the
    owner stops), and the other leases are renewed meanwhile, not after it (found by bench/soak.py: one
    process lost 15 leases at once after waiting on one)."""
    import asyncio
    import time

    lost: list[str] = []

    async def on_lost(session_id: str) -> None:
        lost.append(session_id)

    one = RedisOwnership(redis_client, lease_ms=1000, process_id="one", on_lost=on_lost)
    stuck, fine = _sid(), _sid()
    await one.acquire(stuck)
    await asyncio.sleep(0.5)  # half of its lease is gone
    await one.acquire(fine)
    renew = one._renew

    async def renew_or_hang(*, keys: list[str], args: list[object]) -> object:
        if stuck in keys[0]:
            await asyncio.Event().wait()  # never answers
        return await renew(keys=keys, args=args)

    one._renew = renew_or_hang
    started = time.monotonic()
    assert await asyncio.wait_for(one.renew_all(), timeout=3) == [stuck]
    assert time.monotonic() - started < 0.9  # at its deadline, not after the longest renewal
    assert lost == [stuck] and not one.holds(stuck)
    assert await redis_client.pttl(owner_key(fine)) > 0  # renewed, not lost
    await one.stop()


async def test_two_deployments_on_one_redis_never_see_each_others_sessions(redis_client, settings):
    """Clients choose session ids, so two deployments sharing a Redis may both hold one: each reads and
    writes its own lease, fence and events (chat/live/cluster/keys.py), never the other's."""
    from chat.live.cluster.relay import RedisReplayStore

    sid, store = _sid(), RedisReplayStore(redis_client)
    one, two = (f"deployment-{name}-{uuid.uuid4().hex[:6]}" for name in ("one", "two"))
    a = RedisOwnership(redis_client, lease_ms=5000, process_id="a")
    b = RedisOwnership(redis_client, lease_ms=5000, process_id="b")
    event = {"type": "message_status", "message_id": "m", "status": "started"}
    try:
        settings.CACHE_PREFIX = one
        held_by_a = await a.acquire(sid)
        assert held_by_a is not None
        await store.append(sid, [{**event, "seq": n} for n in (1, 2, 3)], lease=held_by_a)

        settings.CACHE_PREFIX = two
        assert await b.owner_of(sid) is None  # a's lease is not b's
        held_by_b = await b.acquire(sid)
        assert held_by_a is not None and held_by_b is not None and held_by_b.owner == "b"
        assert await store.since(sid, 0) is None  # nothing of a's events: b's clients resync
    finally:
        for prefix, owner in ((one, a), (two, b)):
            settings.CACHE_PREFIX = prefix
            await owner.release(sid)
            await store.delete(sid)


def test_the_channel_layer_of_a_deployment_on_redis_carries_its_prefix(tmp_path) -> None:
    """Groups (account events, processes, mirrors) and process channels: this deployment's only."""
    from tests.test_settings import base_environ, manage

    shown = "from django.conf import settings as s; print(s.CHANNEL_LAYERS['default']['CONFIG']['prefix'])"
    environ = base_environ(tmp_path, REDIS_URL="redis://127.0.0.1:6379/0", AGENTSITE_CACHE_PREFIX="site-one")
    result = manage(environ, "shell", "-c", shown)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "site-one."
