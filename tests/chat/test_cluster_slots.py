"""A user's turn slots in Redis (chat/live/cluster/slots.py): counted per deployment, since user ids are per
database and several deployments (or test servers) may share one Redis."""

from __future__ import annotations

import uuid

from chat.live.cluster.slots import RedisTurnSlots


async def test_a_users_slots_are_counted_within_one_deployment_only(redis_client) -> None:  # type: ignore[no-untyped-def]
    here, there = f"test-{uuid.uuid4().hex}", f"test-{uuid.uuid4().hex}"
    one, two, elsewhere = (
        RedisTurnSlots(redis_client, 1, here),
        RedisTurnSlots(redis_client, 1, here),
        RedisTurnSlots(redis_client, 1, there),
    )
    taken = await one.take(7)
    assert taken is not None
    assert await two.take(7) is None, "the same deployment: user 7 is at the limit"
    other = await elsewhere.take(7)
    assert other is not None, "user 7 of another deployment is another user"
    for slots in (one, two, elsewhere):
        await slots.stop()
    assert await two.take(7) is not None, "given back when the first process stopped"
    await two.stop()
