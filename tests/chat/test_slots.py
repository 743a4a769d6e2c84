"""Fair share (docs/protocol.md §6.4): at most N turns of one user run at once; the others wait `queued` in
their sessions' queues while other users' turns start (chat/live/slots.py and the controller)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from chat.live.controller import SessionController
from chat.live.slots import TurnSlots, fair_share_wait
from tests.chat.scripted import RecordingStore, ScriptedRuntime, drain, next_event, request

Make = Callable[..., SessionController]


@pytest.fixture
def runtime() -> ScriptedRuntime:
    return ScriptedRuntime()


@pytest.fixture
def slots() -> TurnSlots:
    return TurnSlots(limit=1)


@pytest.fixture
async def make(runtime: ScriptedRuntime, slots: TurnSlots) -> AsyncIterator[Make]:
    made: list[SessionController] = []

    def make(session_id: str, user_id: int, **kwargs: Any) -> SessionController:
        controller = SessionController(
            session_id, runtime=runtime, lease=runtime.lease, gate=slots.gate(user_id), **kwargs
        )
        made.append(controller)
        return controller

    yield make
    await asyncio.gather(*(controller.close() for controller in made))


async def until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(2):
        while not predicate():
            await asyncio.sleep(0.001)


async def test_a_users_second_session_waits_queued_while_another_users_turn_starts(
    make: Make, runtime: ScriptedRuntime, slots: TurnSlots
) -> None:
    alice_one, alice_two, bob = make("a1", 1), make("a2", 1), make("b1", 2)
    queue, _ = alice_two.subscribe()
    assert (await alice_one.submit(request("A1")))["status"] == "started"
    ack = await alice_two.submit(request("A2"))
    assert ack == {"message_id": "A2", "status": "queued", "position": 0, "waiting_for": fair_share_wait(1)}
    assert alice_two.snapshot()["running"] is False and alice_two.snapshot()["paused"] is False
    assert (await bob.submit(request("B1")))["status"] == "started"  # another user is not held up
    assert slots.held(1) == 1 and slots.held(2) == 1

    first = await runtime.stream_at(0)
    first.release()  # alice's first turn ends: her waiting session starts
    await next_event(queue, "message_status", message_id="A2", status="started")
    assert alice_two.active_request is not None and alice_two.active_request.message_id == "A2"
    assert slots.held(1) == 1


async def test_the_slot_goes_back_however_the_turn_ends(
    make: Make, runtime: ScriptedRuntime, slots: TurnSlots
) -> None:
    controller = make("a1", 1, store=RecordingStore())
    await controller.submit(request("ok"))
    (await runtime.stream_at(0)).release()
    await until(lambda: slots.held(1) == 0)

    await controller.submit(request("cancelled"))
    await runtime.stream_at(1)
    await controller.cancel()
    assert slots.held(1) == 0

    await controller.submit(request("failed"), steer=True)  # "send now": the queue was paused by cancel
    failing = await runtime.stream_at(2)
    failing.failure = RuntimeError("boom")
    failing.release()
    await until(lambda: slots.held(1) == 0)

    await controller.submit(request("closed"), steer=True)
    await runtime.stream_at(3)
    await controller.close()
    assert slots.held(1) == 0


async def test_send_now_while_the_users_slots_are_taken_unpauses_and_goes_first(
    make: Make, runtime: ScriptedRuntime
) -> None:
    busy, waiting = make("a1", 1), make("a2", 1, paused=True)
    await busy.submit(request("running"))
    await waiting.submit(request("first"))
    await waiting.submit(request("second"))
    assert waiting.paused
    ack = await waiting.steer("second")  # send now: no slot free, so it is next, and the queue goes on
    assert ack["status"] == "queued"
    assert waiting.paused is False
    (await runtime.stream_at(0)).release()
    await until(lambda: waiting.active_request is not None)
    assert waiting.active_request is not None and waiting.active_request.message_id == "second"
    assert [item.request.message_id for item in waiting.pending] == ["first"]


async def test_a_waiting_session_that_was_paused_or_closed_meanwhile_does_not_take_the_slot(
    make: Make, runtime: ScriptedRuntime, slots: TurnSlots
) -> None:
    busy, paused, closed, ready = make("a1", 1), make("a2", 1), make("a3", 1), make("a4", 1)
    await busy.submit(request("running"))
    for controller, message_id in ((paused, "p"), (closed, "c"), (ready, "r")):
        assert (await controller.submit(request(message_id)))["status"] == "queued"
    await paused.cancel()  # pauses its queue
    await closed.close()
    (await runtime.stream_at(0)).release()
    await until(lambda: ready.active_request is not None)
    assert paused.active_request is None and paused.pending and slots.held(1) == 1


async def test_without_a_limit_every_turn_starts(runtime: ScriptedRuntime) -> None:
    slots = TurnSlots(limit=0)
    assert slots.gate(1) is None
    controllers = [
        SessionController(f"s{n}", runtime=runtime, lease=runtime.lease, gate=slots.gate(1)) for n in range(5)
    ]
    for n, controller in enumerate(controllers):
        assert (await controller.submit(request(f"m{n}")))["status"] == "started"
    for controller in controllers:
        await controller.close()


async def test_every_queued_message_of_a_waiting_session_runs_in_order(
    make: Make, runtime: ScriptedRuntime
) -> None:
    runtime.auto_release = True
    busy, waiting = make("a1", 1), make("a2", 1)
    queue, _ = waiting.subscribe()
    runtime.auto_release = False
    await busy.submit(request("running"))
    runtime.auto_release = True
    for message_id in ("x", "y", "z"):
        await waiting.submit(request(message_id))
    (await runtime.stream_at(0)).release()
    for message_id in ("x", "y", "z"):
        await next_event(queue, "result", message_id=message_id)
    assert [e for e in drain(queue) if e["type"] == "error"] == []


FAIR_SHARE = {
    "reason": "fair_share",
    "limit": 1,
    "message": "1 of your chats is running (at most 1 at once); this one starts when one of them ends.",
}


async def test_a_message_waiting_for_a_turn_slot_says_why_and_what_frees_it(
    make: Make, runtime: ScriptedRuntime
) -> None:
    busy, waiting = make("a1", 1), make("a2", 1)
    queue, _ = waiting.subscribe()
    await busy.submit(request("running"))

    await waiting.submit(request("A2"))

    event = await next_event(queue, "message_status", message_id="A2", status="queued")
    assert event["waiting_for"] == FAIR_SHARE
    assert event["content"] == "A2"  # the session's other sockets show its text
    assert waiting.snapshot()["waiting_for"] == FAIR_SHARE  # a socket that connects now learns it too
    await waiting.submit(request("A3"))  # later messages of the waiting session wait for the same
    assert (await next_event(queue, "message_status", message_id="A3"))["waiting_for"] == FAIR_SHARE

    (await runtime.stream_at(0)).release()
    await next_event(queue, "message_status", message_id="A2", status="started")
    assert "waiting_for" not in waiting.snapshot()


async def test_a_message_behind_its_own_sessions_turn_gives_no_fair_share_reason(
    make: Make, runtime: ScriptedRuntime
) -> None:
    controller = make("a1", 1)
    queue, _ = controller.subscribe()
    await controller.submit(request("running"))

    ack = await controller.submit(request("next"))

    assert "waiting_for" not in ack
    event = await next_event(queue, "message_status", message_id="next", status="queued")
    assert "waiting_for" not in event and event["content"] == "next"
    assert "waiting_for" not in controller.snapshot()


async def test_a_paused_queue_gives_no_fair_share_reason_until_send_now_says_it_to_every_socket(
    make: Make, runtime: ScriptedRuntime
) -> None:
    busy, paused = make("a1", 1), make("a2", 1, paused=True)
    queue, _ = paused.subscribe()
    await busy.submit(request("running"))

    ack = await paused.submit(request("held"))

    assert "waiting_for" not in ack and "waiting_for" not in paused.snapshot()
    drain(queue)
    sent_now = await paused.steer("held")  # "send now" while the user's one slot is taken
    assert sent_now["waiting_for"] == FAIR_SHARE and paused.paused is False
    event = await next_event(queue, "message_status", message_id="held", status="queued")
    assert event["waiting_for"] == FAIR_SHARE and event["content"] == "held"


async def test_when_its_own_turn_ends_and_no_slot_is_free_the_head_is_announced_waiting_once(
    make: Make, runtime: ScriptedRuntime, slots: TurnSlots
) -> None:
    slots.limit = 2
    own, other = make("a1", 1), make("a2", 1)
    queue, _ = own.subscribe()
    await own.submit(request("first"))
    await own.submit(request("second"))  # behind its own session's turn: no reason
    assert "waiting_for" not in (await next_event(queue, "message_status", message_id="second"))
    await other.submit(request("elsewhere"))
    slots.limit = 1  # the user's other chat keeps the one slot when this session's turn ends

    (await runtime.stream_at(0)).release()

    await next_event(queue, "result", message_id="first")
    event = await next_event(queue, "message_status", message_id="second", status="queued")
    assert event["waiting_for"] == FAIR_SHARE and event["position"] == 0
    await own.kick()  # asked again (a wake-up that finds no slot): not said again
    assert [e for e in drain(queue) if e["type"] == "message_status"] == []
    (await runtime.stream_at(1)).release()
    await next_event(queue, "message_status", message_id="second", status="started")
