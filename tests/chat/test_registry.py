"""LiveRegistry: one controller per session (loaded once), the turn lease, close and shutdown."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agents.contract import InputError
from chat.live.commands import Cancel, ConfirmationReply, Remove, Steer, Submit
from chat.live.controller import SessionController
from chat.live.events import EventLog
from chat.live.registry import LiveRegistry
from tests.chat.scripted import RecordingStore, ScriptedRuntime, drain, next_event, request


@pytest.fixture
def runtime() -> ScriptedRuntime:
    return ScriptedRuntime()


def registry_of(runtime: ScriptedRuntime, load: Any = None, **options: Any) -> LiveRegistry:
    """A registry whose sessions are plain controllers (no store) with an event log each."""

    async def plain(session_id: str) -> tuple[SessionController, EventLog]:
        controller = SessionController(session_id, runtime=registry.runtime, lease=registry.lease)
        return controller, log_of(session_id)

    registry = LiveRegistry(runtime=runtime, load=load or plain, **options)
    return registry


def log_of(session_id: str) -> EventLog:
    return EventLog(session_id, last_seq=0, reserved=10**9)


@pytest.fixture
async def service(runtime: ScriptedRuntime) -> AsyncIterator[LiveRegistry]:
    service = registry_of(runtime)
    yield service
    await service.shutdown()


def other_tasks() -> set[asyncio.Task[object]]:
    current = asyncio.current_task()
    return {task for task in asyncio.all_tasks() if task is not current}


async def test_concurrent_callers_get_the_same_controller_from_a_single_load(
    runtime: ScriptedRuntime,
) -> None:
    loads: list[str] = []
    release = asyncio.Event()

    async def load(session_id: str) -> tuple[SessionController, EventLog]:
        loads.append(session_id)
        await release.wait()  # a slow database read
        return SessionController(session_id, runtime=service.runtime, lease=service.lease), log_of(session_id)

    service = registry_of(runtime, load)
    waiting = [asyncio.create_task(service.get("one")) for _ in range(3)]
    await asyncio.sleep(0)
    assert service.peek("one") is None
    release.set()
    controllers = await asyncio.gather(*waiting)
    assert loads == ["one"]
    assert controllers[0] is controllers[1] is controllers[2] is service.peek("one")
    assert await service.get("one") is controllers[0] and loads == ["one"]
    await service.shutdown()


async def test_a_failed_load_reaches_every_waiter_and_the_next_call_loads_again(
    runtime: ScriptedRuntime,
) -> None:
    attempts: list[int] = []

    async def load(session_id: str) -> tuple[SessionController, EventLog]:
        attempts.append(1)
        await asyncio.sleep(0)
        if len(attempts) == 1:
            raise LookupError("database unavailable")
        return SessionController(session_id, runtime=service.runtime, lease=service.lease), log_of(session_id)

    service = registry_of(runtime, load)
    results = await asyncio.gather(service.get("one"), service.get("one"), return_exceptions=True)
    assert [type(result) for result in results] == [LookupError, LookupError]
    assert isinstance(await service.get("one"), SessionController)
    assert len(attempts) == 2
    await service.shutdown()


async def test_close_closes_only_that_session_and_shutdown_closes_the_rest(
    service: LiveRegistry, runtime: ScriptedRuntime
) -> None:
    one = await service.get("one")
    two = await service.get("two")
    first, _ = one.subscribe()
    await asyncio.gather(
        service.dispatch("one", Submit(request("A"))), service.dispatch("two", Submit(request("B")))
    )
    await runtime.stream_at(1)
    await service.dispatch("two", Submit(request("B follow-up")))
    streams = {stream.session_id: stream for stream in runtime.streams}
    assert service.active_turns == 2
    await service.close("one")
    await service.close("one")  # again: nothing more happens
    await service.close("never-loaded")
    assert "one" not in service.logs
    assert one.closed and one.active_task is None and streams["one"].closed
    assert statuses_of(drain(first))[-1] == ("result", "cancelled")
    assert not streams["two"].closed and two.active_task is not None
    assert service.active_turns == 1
    assert service.peek("one") is None and service.peek("two") is two
    await service.shutdown()
    assert two.closed and two.active_task is None and two.pending == []
    assert streams["two"].closed
    assert service.active_turns == 0
    assert service.controllers == {}
    assert other_tasks() == set()


def statuses_of(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["data"]["status"]) for e in events if e["type"] == "result"]


async def test_the_lease_bounds_concurrent_turns_and_a_waiting_turn_takes_steers_when_it_starts(
    runtime: ScriptedRuntime,
) -> None:
    service = registry_of(runtime, max_concurrent_turns=1)
    try:
        await service.dispatch("one", Submit(request("A")))
        first = await runtime.stream_at(0)
        assert await service.dispatch("two", Submit(request("X"))) == {"message_id": "X", "status": "started"}
        await service.dispatch("two", Submit(request("Y")))
        deferred = await service.dispatch("two", Steer("Y"))
        assert deferred == {"message_id": "Y", "status": "queued", "position": 0}
        assert len(runtime.streams) == 1 and service.active_turns == 2  # X waits for the lease
        queue, _ = (await service.get("two")).subscribe()
        first.release()
        await next_event(queue, "message_status", status="steered", message_id="Y")
        second = await runtime.stream_at(1)
        assert second.request.message_id == "X" and second.inputs == ["Y"]
    finally:
        await service.shutdown()


async def test_dispatch_runs_each_command_on_that_sessions_controller(
    service: LiveRegistry, runtime: ScriptedRuntime
) -> None:
    assert await service.dispatch("one", Submit(request("A"))) == {"message_id": "A", "status": "started"}
    stream = await runtime.stream_at(0)
    await service.dispatch("one", Submit(request("B")))
    await service.dispatch("one", Submit(request("C")))
    assert await service.dispatch("one", Steer("B")) == {"message_id": "B", "status": "steered"}
    assert await service.dispatch("one", Submit(request("D"), steer=True)) == {
        "message_id": "D",
        "status": "steered",
    }
    assert await service.dispatch("one", Remove("C")) == {"message_id": "C", "status": "removed"}
    stream.emit({"type": "confirmation_request", "data": {"confirmation_id": "k1", "tool": "shell"}})
    controller = await service.get("one")
    queue, _ = controller.subscribe()
    await next_event(queue, "confirmation_request")
    assert await service.dispatch("one", ConfirmationReply("k1", True)) == {
        "confirmation_id": "k1",
        "approved": True,
    }
    assert stream.resolutions == [("k1", True, None)]
    with pytest.raises(InputError) as raised:
        await service.dispatch("two", Steer("B"))  # another session's message
    assert raised.value.code == "no_longer_pending"
    assert await service.dispatch("one", Cancel()) is None
    assert stream.inputs == ["B", "D"] and stream.closed
    assert controller.paused and service.active_turns == 0


async def test_the_loader_injects_store_and_publish_and_the_registry_still_counts_turns(
    runtime: ScriptedRuntime,
) -> None:
    store = RecordingStore()

    async def load(session_id: str) -> tuple[SessionController, EventLog]:
        controller = SessionController(
            session_id,
            runtime=service.runtime,
            lease=service.lease,
            store=store,
            publish=store.publish,
        )
        return controller, log_of(session_id)

    service = registry_of(runtime, load)
    try:
        await service.dispatch("one", Submit(request("A")))
        assert service.active_turns == 1
        assert store.log[:2] == [("store", "A", "running"), ("event", "A", "started")]
        stream = await runtime.stream_at(0)
        task = service.controllers["one"].active_task
        stream.release()
        assert task is not None
        await task
        assert service.active_turns == 0 and store.statuses == {"A": "completed"}
    finally:
        await service.shutdown()


def test_the_registry_needs_at_least_one_turn_slot(runtime: ScriptedRuntime) -> None:
    with pytest.raises(ValueError):
        registry_of(runtime, max_concurrent_turns=0)


async def test_a_command_whose_caller_goes_away_is_carried_out_whole(runtime: ScriptedRuntime) -> None:
    """A socket closed while its message was being stored (daphne cancels its handler): the message is
    stored and queued both, never stored and in nobody's queue, where it would never run (found by
    bench/soak.py)."""
    gate = asyncio.Event()

    class SlowStore(RecordingStore):
        async def save_message(self, item: Any, *, status: str, new: bool = False, error: Any = None) -> None:
            await gate.wait()
            await super().save_message(item, status=status, new=new, error=error)

    store = SlowStore()

    async def load(session_id: str) -> tuple[SessionController, EventLog]:
        controller = SessionController(session_id, runtime=runtime, lease=registry.lease, store=store)
        return controller, log_of(session_id)

    registry = registry_of(runtime, load=load)
    try:
        caller = asyncio.create_task(registry.dispatch("s", Submit(request=request("A"))))
        await asyncio.sleep(0.01)
        caller.cancel()  # the socket went away mid-command
        await asyncio.gather(caller, return_exceptions=True)
        gate.set()
        controller = await registry.get("s")
        async with asyncio.timeout(2):
            while store.statuses.get("A") != "running" or controller.active_request is None:
                await asyncio.sleep(0.01)
        assert controller.active_request.message_id == "A"
        # A refused command whose caller went away is not an exception left for nobody (logged as such).
        loop = asyncio.get_running_loop()
        unretrieved: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _, context: unretrieved.append(context))
        caller = asyncio.create_task(registry.dispatch("s", Submit(request=request("A"))))
        await asyncio.sleep(0)
        caller.cancel()
        await asyncio.gather(caller, return_exceptions=True)
        await asyncio.sleep(0.05)
        gc.collect()
        loop.set_exception_handler(None)
        assert unretrieved == []
    finally:
        await registry.shutdown()
