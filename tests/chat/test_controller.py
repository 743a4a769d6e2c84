"""SessionController: the per-session queue of docs/protocol.md §3.4, driven through a scripted turn
stream."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agents.contract import ChatRequest, InputError
from chat.live.controller import SessionController
from chat.live.queue import PendingItem
from chat.markdown import render_markdown
from tests.chat.scripted import RecordingStore, ScriptedRuntime, StorageDown, drain, next_event, request

MakeController = Callable[..., SessionController]


@pytest.fixture
def runtime() -> ScriptedRuntime:
    return ScriptedRuntime()


@pytest.fixture
async def make(runtime: ScriptedRuntime) -> AsyncIterator[MakeController]:
    made: list[SessionController] = []

    def make(session_id: str = "one", **kwargs: Any) -> SessionController:
        controller = SessionController(session_id, runtime=runtime, lease=runtime.lease, **kwargs)
        made.append(controller)
        return controller

    yield make
    await asyncio.gather(*(controller.close() for controller in made))


def statuses(events: list[dict[str, Any]]) -> list[tuple[str, str | None, str | None]]:
    """(type, status, message_id) of the queue events, in delivery order."""
    return [
        (e["type"], e.get("status") or e.get("data", {}).get("status"), e.get("message_id"))
        for e in events
        if e["type"] in {"message_status", "result"}
    ]


async def test_followups_run_fifo_and_each_result_precedes_the_next_started(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    controller = make()
    queue, _ = controller.subscribe()
    assert await controller.submit(request("A")) == {"message_id": "A", "status": "started"}
    assert await controller.submit(request("B")) == {"message_id": "B", "status": "queued", "position": 0}
    assert await controller.submit(request("C")) == {"message_id": "C", "status": "queued", "position": 1}
    for index in range(3):
        stream = await runtime.stream_at(index)
        assert len(runtime.streams) == index + 1  # one turn at a time
        last_task = controller.active_task
        stream.release()
    assert last_task is not None
    await last_task
    assert controller.active_task is None
    assert [s.request.message_id for s in runtime.streams] == ["A", "B", "C"]
    assert statuses(drain(queue)) == [
        ("message_status", "started", "A"),
        ("message_status", "queued", "B"),
        ("message_status", "queued", "C"),
        ("result", "completed", "A"),
        ("message_status", "started", "B"),
        ("result", "completed", "B"),
        ("message_status", "started", "C"),
        ("result", "completed", "C"),
    ]


async def test_a_runtime_may_open_its_stream_asynchronously(make: MakeController) -> None:
    runtime = ScriptedRuntime(open_async=True)
    controller = SessionController("one", runtime=runtime, lease=runtime.lease)
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    await controller.submit(request("B"), steer=True)  # deferred while the stream is being opened
    stream = await runtime.stream_at(0)
    await next_event(queue, "message_status", status="steered", message_id="B")
    stream.release()
    assert (await next_event(queue, "result"))["data"]["status"] == "completed"
    assert stream.consumed == ["B"]
    await controller.close()


async def test_completed_turn_publishes_its_events_with_message_id_then_final_answer_and_result(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    controller = make()
    queue, _ = controller.subscribe()
    await controller.submit(request("A", "hello"))
    stream = await runtime.stream_at(0)
    stream.emit({"type": "tool_call", "call_id": "c1", "name": "get_current_time", "arguments": {}})
    stream.release()
    events = [await next_event(queue, "delta")]
    events += [await queue.get() for _ in range(3)]
    assert [{k: v for k, v in e.items() if k != "seq"} for e in events] == [
        {"type": "delta", "content": "re: hello", "message_id": "A"},
        {
            "type": "tool_call",
            "call_id": "c1",
            "name": "get_current_time",
            "arguments": {},
            "message_id": "A",
        },
        {
            "type": "final_answer",
            "message_id": "A",
            "content": "re: hello",
            "is_final": True,
            "html": render_markdown("re: hello"),
        },
        {
            "type": "result",
            "message_id": "A",
            "data": {
                "status": "completed",
                "final_content": "re: hello",
                "stop_reason": "stop",
                "usage": {"total_tokens": 3},
            },
        },
    ]
    assert stream.closed


async def test_several_steers_remove_of_a_non_head_message_and_direct_input_reach_the_running_turn(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    controller = make()
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    stream = await runtime.stream_at(0)
    for text in ("B", "C", "D", "E"):
        await controller.submit(request(text))
    assert await controller.steer("C") == {"message_id": "C", "status": "steered"}
    assert await controller.steer("B") == {"message_id": "B", "status": "steered"}
    direct = await controller.submit(request("direct", "backend input"), steer=True)
    assert direct == {"message_id": "direct", "status": "steered"}
    assert await controller.remove("D") == {"message_id": "D", "status": "removed"}
    assert stream.inputs == ["C", "B", "backend input"]
    assert [item.request.message_id for item in controller.pending] == ["E"]
    for operation in (controller.steer, controller.remove):
        with pytest.raises(InputError, match="no longer pending") as raised:
            await operation("C")
        assert raised.value.code == "no_longer_pending" and raised.value.message_id == "C"
    status_events = [e for e in drain(queue) if e["type"] == "message_status"]
    assert [(e["status"], e["message_id"], e.get("position")) for e in status_events[1:]] == [
        ("queued", "B", 0),
        ("queued", "C", 1),
        ("queued", "D", 2),
        ("queued", "E", 3),
        ("steered", "C", None),
        ("steered", "B", None),
        ("steered", "direct", None),
        ("removed", "D", None),
    ]
    stream.release()
    await next_event(queue, "message_status", status="started", message_id="E")
    assert (await runtime.stream_at(1)).request.message_id == "E"
    assert stream.consumed == ["C", "B", "backend input"]


async def test_steer_before_the_stream_starts_is_remembered_and_applied_when_it_does(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    runtime.gate.clear()  # the turn waits for a lease: it has not started streaming
    controller = make()
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    await controller.submit(request("B"))
    assert await controller.steer("B") == {"message_id": "B", "status": "queued", "position": 0}
    assert controller.snapshot()["pending"] == [
        {"message_id": "B", "content": "B", "position": 0, "steer_requested": True}
    ]
    runtime.gate.set()
    await next_event(queue, "message_status", status="steered", message_id="B")
    assert runtime.streams[0].inputs == ["B"]
    assert controller.pending == []


async def test_steer_after_the_turn_stopped_taking_input_stays_pending_and_runs_next(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    controller = make()
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    stream = await runtime.stream_at(0)
    stream.input_closed = True  # the turn is finishing
    await controller.submit(request("C"))
    assert await controller.steer("C") == {"message_id": "C", "status": "queued", "position": 0}
    direct = await controller.submit(request("D"), steer=True)
    assert direct == {"message_id": "D", "status": "queued", "position": 1}
    assert [item.request.message_id for item in controller.pending] == ["C", "D"]
    assert stream.inputs == []
    stream.release()
    await next_event(queue, "message_status", status="started", message_id="C")
    assert (await runtime.stream_at(1)).request.message_id == "C"


@pytest.mark.parametrize("before_start", [True, False])
async def test_cancel_keeps_the_queue_paused_and_send_now_resumes(
    make: MakeController, runtime: ScriptedRuntime, before_start: bool
) -> None:
    if before_start:
        runtime.gate.clear()
    controller = make()
    queue, _ = controller.subscribe()
    watch, _ = controller.subscribe()
    await controller.submit(request("A"))
    if not before_start:
        await runtime.stream_at(0)
    await controller.submit(request("B"))
    await controller.submit(request("C"))
    await controller.cancel()
    runtime.gate.set()
    assert controller.active_task is None
    assert controller.paused
    assert all(stream.closed for stream in runtime.streams)
    assert len(runtime.streams) == (0 if before_start else 1)
    assert await controller.submit(request("D")) == {"message_id": "D", "status": "queued", "position": 2}
    assert controller.active_task is None
    assert await controller.steer("C") == {"message_id": "C", "status": "started"}
    assert not controller.paused
    stream = await runtime.stream_at(0 if before_start else 1)
    assert stream.request.message_id == "C"
    stream.release()
    task = controller.active_task
    await next_event(watch, "message_status", status="started", message_id="B")  # the queue resumed
    assert task is not None and task.done()
    assert statuses(drain(queue)) == [
        ("message_status", "started", "A"),
        ("message_status", "queued", "B"),
        ("message_status", "queued", "C"),
        ("result", "cancelled", "A"),
        ("message_status", "queued", "D"),
        ("message_status", "started", "C"),
        ("result", "completed", "C"),
        ("message_status", "started", "B"),
    ]


async def test_cancel_publishes_result_cancelled_for_the_active_message(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    controller = make()
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    await runtime.stream_at(0)
    await controller.cancel()
    result = await next_event(queue, "result")
    assert result["message_id"] == "A" and result["data"] == {"status": "cancelled"}


async def test_cancel_of_a_turn_that_is_already_finishing_keeps_its_outcome_and_pauses(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    controller = make()
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    stream = await runtime.stream_at(0)
    stream.close_gate = asyncio.Event()
    stream.release()
    await stream.closing.wait()  # the turn has ended and is closing its stream
    assert await controller.submit(request("B")) == {"message_id": "B", "status": "queued", "position": 0}
    cancelling = asyncio.create_task(controller.cancel())
    await asyncio.sleep(0)
    assert not cancelling.done()
    stream.close_gate.set()
    await cancelling
    assert stream.closed and controller.active_task is None and controller.paused
    assert statuses(drain(queue)) == [
        ("message_status", "started", "A"),
        ("message_status", "queued", "B"),
        ("result", "completed", "A"),
        ("result", "cancelled", None),
    ]
    assert len(runtime.streams) == 1


async def test_cancel_while_idle_publishes_result_cancelled_and_pauses(make: MakeController) -> None:
    controller = make()
    queue, _ = controller.subscribe()
    await controller.cancel()
    event = queue.get_nowait()
    assert event["type"] == "result" and event["data"] == {"status": "cancelled"}
    assert "message_id" not in event
    assert controller.paused
    assert await controller.submit(request("A")) == {"message_id": "A", "status": "queued", "position": 0}


async def test_two_sessions_with_reconnects_several_subscribers_and_snapshots_keep_steers_isolated(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    one, two = make("one"), make("two")
    first, _ = one.subscribe()
    second, _ = two.subscribe()
    await asyncio.gather(one.submit(request("A")), two.submit(request("X")))
    await asyncio.gather(one.submit(request("B")), two.submit(request("Y")))
    await runtime.stream_at(1)
    streams = {stream.session_id: stream for stream in runtime.streams}
    one.unsubscribe(first)
    assert not streams["one"].closed  # a socket leaving does not end the turn
    reconnected, snapshot = one.subscribe()
    assert snapshot == {
        "running": True,
        "paused": False,
        "active_message_id": "A",
        "pending": [{"message_id": "B", "content": "B", "position": 0, "steer_requested": False}],
        "confirmations": [],
    }
    extra, _ = one.subscribe()
    await one.steer("B")
    await two.steer("Y")
    assert (streams["one"].inputs, streams["two"].inputs) == (["B"], ["Y"])
    for queue in (reconnected, extra):
        await next_event(queue, "message_status", status="steered", message_id="B")
    assert not [e for e in drain(first) if e.get("status") == "steered"]  # unsubscribed: nothing more
    assert [e["message_id"] for e in drain(second) if e["type"] == "message_status"] == ["X", "Y", "Y"]
    with pytest.raises(InputError) as raised:
        await one.steer("Y")
    assert raised.value.code == "no_longer_pending"
    one.unsubscribe(reconnected)
    one.unsubscribe(extra)
    tasks = [task for task in (one.active_task, two.active_task) if task is not None]
    for stream in runtime.streams:
        stream.release()
    await asyncio.gather(*tasks)
    assert len(tasks) == 2
    assert one.active_task is None and two.active_task is None
    _, completed = one.subscribe()
    assert completed["running"] is False and completed["pending"] == []


async def test_model_error_pauses_the_queue_and_a_later_submit_does_not_start(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    store = RecordingStore()
    controller = make(store=store)
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    stream = await runtime.stream_at(0)
    await controller.submit(request("B"))
    stream.error = {"code": "model_error", "message": "The provider failed."}
    task = controller.active_task
    stream.release()
    assert task is not None
    await task
    result = await next_event(queue, "result")
    assert result["message_id"] == "A"
    assert result["data"] == {
        "status": "error",
        "error": {"code": "model_error", "message": "The provider failed."},
        "final_content": "partial",
        "stop_reason": "error",
    }
    assert store.statuses["A"] == "error"
    assert store.errors == {"A": {"code": "model_error", "message": "The provider failed."}}
    assert controller.paused and len(runtime.streams) == 1
    assert await controller.submit(request("C")) == {"message_id": "C", "status": "queued", "position": 1}
    assert controller.active_task is None
    assert [item.request.message_id for item in controller.pending] == ["B", "C"]
    await controller.steer("B")  # send now: B runs, and the queue continues with C
    (await runtime.stream_at(1)).release()
    await next_event(queue, "message_status", status="started", message_id="C")


async def test_close_clears_the_queue_refuses_input_and_never_restarts(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    store = RecordingStore()
    controller = make(store=store)
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    stream = await runtime.stream_at(0)
    await controller.submit(request("B"))
    await controller.close()
    assert controller.closed and controller.pending == [] and controller.active_task is None
    assert stream.closed and len(runtime.streams) == 1
    assert store.statuses == {"A": "cancelled", "B": "closed"}
    assert statuses(drain(queue))[-1] == ("result", "cancelled", "A")
    for refused in (controller.submit(request("D")), controller.steer("B"), controller.remove("B")):
        with pytest.raises(InputError) as raised:
            await refused
        assert raised.value.code == "session_closed"
    await controller.cancel()
    await controller.close()  # idempotent
    late, _ = controller.subscribe()
    assert drain(queue) == [] and drain(late) == []


@pytest.mark.parametrize("consume_first", [False, True])
async def test_cancel_restores_only_unconsumed_steers_with_original_ids_config_and_positions(
    make: MakeController, runtime: ScriptedRuntime, consume_first: bool
) -> None:
    controller = make()
    queue, _ = controller.subscribe()
    left, tail = request("left"), request("tail")
    first = ChatRequest(
        message_id="B",
        content="same text",
        config={"generation": {"temperature": 0.2}},
        approval_mode="full_access",
    )
    second = ChatRequest(message_id="C", content="same text", config={"generation": {"temperature": 0.8}})
    await controller.submit(request("A"))
    stream = await runtime.stream_at(0)
    for item in (left, first, second, tail):
        await controller.submit(item)
    await controller.steer("C")
    if consume_first:
        assert stream.consume_inputs() == ["same text"]
    await controller.steer("B")
    drain(queue)
    await controller.cancel()
    expected = [left, first, tail] if consume_first else [left, first, second, tail]
    assert [item.request for item in controller.pending] == expected
    assert controller.pending[1].request is first
    assert controller.active_task is None and len(runtime.streams) == 1  # paused: nothing started
    receipts = [e for e in drain(queue) if e["type"] in {"message_status", "result"}]
    assert [(e["message_id"], e["status"], e["position"]) for e in receipts[:-1]] == (
        [("B", "restored", 1)] if consume_first else [("B", "restored", 1), ("C", "restored", 2)]
    )
    assert receipts[-1]["type"] == "result" and receipts[-1]["data"] == {"status": "cancelled"}
    _, snapshot = controller.subscribe()
    assert [item["message_id"] for item in snapshot["pending"]] == [r.message_id for r in expected]
    await controller.steer("B")
    resumed = await runtime.stream_at(1)
    assert controller.active_request is first
    assert resumed.request is first and resumed.request.approval_mode == "full_access"
    assert resumed.inputs == []


@pytest.mark.parametrize("failure_kind", ["exception", "result_error"])
async def test_failed_turn_restores_unconsumed_steers_and_keeps_followups_paused(
    make: MakeController, runtime: ScriptedRuntime, failure_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    controller = make()
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    stream = await runtime.stream_at(0)
    await controller.submit(request("B"), steer=True)
    await controller.submit(request("C"))
    if failure_kind == "exception":
        stream.failure = RuntimeError("request failed with secret detail")
    else:
        stream.error = {"code": "model_error", "message": "request failed"}
    task = controller.active_task
    assert task is not None
    with caplog.at_level(logging.ERROR, logger="chat.controller"):
        stream.release()
        await task
    assert controller.active_task is None and controller.paused
    assert [item.request.message_id for item in controller.pending] == ["B", "C"]
    assert len(runtime.streams) == 1 and stream.closed
    result = await next_event(queue, "result")
    restored = [e for e in drain(queue) if e["type"] == "message_status"]
    assert restored == []  # the restore came before the result
    if failure_kind == "exception":
        assert result["data"]["error"]["code"] == "internal_error"
        assert "secret" not in result["data"]["error"]["message"]
        assert "request failed with secret detail" in caplog.text  # the traceback is logged
    else:
        assert result["data"]["error"] == {"code": "model_error", "message": "request failed"}


async def test_failed_turn_publishes_restored_before_its_result(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    controller = make()
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    stream = await runtime.stream_at(0)
    await controller.submit(request("B"), steer=True)
    stream.failure = RuntimeError("boom")
    stream.release()
    await next_event(queue, "message_status", status="steered", message_id="B")
    restored = await next_event(queue, "message_status", status="restored")
    assert restored["message_id"] == "B" and restored["position"] == 0
    assert (await next_event(queue, "result"))["message_id"] == "A"
    assert controller.snapshot()["pending"][0]["message_id"] == "B"


async def test_a_turn_stopped_by_its_storage_failing_writes_and_publishes_nothing_more(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    """The database went away under the turn: no `error` result is stored or published over it (the
    store has the session's live state dropped; the stored `running` row ends `interrupted` on reload)."""
    store = RecordingStore()
    controller = make(store=store)
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    await controller.submit(request("B"))
    stream = await runtime.stream_at(0)
    stream.failure = StorageDown("connection refused")
    task = controller.active_task
    assert task is not None
    stream.release()
    await task
    assert ("storage_failed", "connection refused") in store.log
    assert store.statuses["A"] == "running" and store.statuses["B"] == "pending"
    assert [e for e in drain(queue) if e["type"] == "result"] == []
    assert controller.active_task is None and len(runtime.streams) == 1  # B did not start


async def test_a_turn_that_fails_after_its_session_was_let_go_logs_no_error_and_writes_nothing(
    make: MakeController, runtime: ScriptedRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process took the session over: this one silenced the controller (chat/live/cluster/sessions.py
    `_lost`), and what the turn raises afterwards (its next write refused by the fence, chat/store.py) is
    nobody's to hear: no internal error logged with a traceback, nothing stored or published."""
    from chat.store import Fenced

    store = RecordingStore()
    controller = make(store=store)
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    stream = await runtime.stream_at(0)
    controller.silence()
    stream.failure = Fenced("Session s is owned by another process now.")
    task = controller.active_task
    assert task is not None
    stream.release()
    await task
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    assert controller.active_task is None and store.statuses["A"] == "running"
    assert [e for e in drain(queue) if e["type"] == "result"] == []


async def test_cancel_in_one_session_leaves_another_sessions_steers_alone(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    one, two = make("one"), make("two")
    await asyncio.gather(one.submit(request("A")), two.submit(request("X")))
    await runtime.stream_at(1)
    await one.submit(request("same"), steer=True)
    await two.submit(request("same"), steer=True)
    await one.cancel()
    assert [item.request.message_id for item in one.pending] == ["same"]
    assert two.pending == [] and two.active_task is not None
    stream_two = next(stream for stream in runtime.streams if stream.session_id == "two")
    assert stream_two.inputs == ["same"] and not stream_two.closed
    task = two.active_task
    stream_two.release()
    await task
    assert two.pending == [] and stream_two.consumed == ["same"]


async def test_cancel_during_startup_forgets_deferred_steers(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    runtime.gate.clear()
    controller = make()
    await controller.submit(request("A"))
    assert await controller.submit(request("B"), steer=True) == {
        "message_id": "B",
        "status": "queued",
        "position": 0,
    }
    await controller.submit(request("C"))
    await controller.cancel()
    assert [item.steer_requested for item in controller.pending] == [False, False]
    runtime.gate.set()
    await controller.steer("C")
    stream = await runtime.stream_at(0)
    assert stream.request.message_id == "C" and stream.inputs == []


@pytest.mark.parametrize("taken", ["A", "B", "C"])
async def test_a_message_id_already_pending_active_or_steered_is_refused(
    make: MakeController, runtime: ScriptedRuntime, taken: str
) -> None:
    # The store refuses the id when the message's first write claims it (chat/store.py, its unique key).
    controller = make(store=RecordingStore())
    await controller.submit(request("A"))
    await runtime.stream_at(0)
    await controller.submit(request("B"))
    await controller.submit(request("C"), steer=True)
    with pytest.raises(InputError) as raised:
        await controller.submit(request(taken, "again"))
    assert raised.value.code == "duplicate_message_id" and raised.value.message_id == taken
    assert [item.request.content for item in controller.pending] == ["B"]


@pytest.mark.parametrize("message_id", ["A", "unknown"])
async def test_steer_or_remove_of_the_active_or_an_unknown_message_is_no_longer_pending(
    make: MakeController, runtime: ScriptedRuntime, message_id: str
) -> None:
    controller = make()
    await controller.submit(request("A"))
    await runtime.stream_at(0)
    for operation in (controller.steer, controller.remove):
        with pytest.raises(InputError) as raised:
            await operation(message_id)
        assert raised.value.to_dict() == {
            "code": "no_longer_pending",
            "message": f"Message {message_id} is no longer pending.",
            "message_id": message_id,
        }
    assert controller.active_request is not None and controller.active_request.message_id == "A"


async def test_snapshot_tracks_pending_confirmations_and_replies_reach_the_turn(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    controller = make()
    queue, _ = controller.subscribe()
    await controller.submit(request("A"))
    stream = await runtime.stream_at(0)
    data = {"confirmation_id": "k1", "kind": "tool", "tool": "shell", "arguments": {}, "reason": "dangerous"}
    stream.emit({"type": "confirmation_request", "data": data})
    published = await next_event(queue, "confirmation_request")
    assert "message_id" not in published and published["data"] == data
    assert controller.snapshot()["confirmations"] == [data]
    with pytest.raises(InputError) as unknown:
        await controller.resolve_confirmation("nope", True)
    assert unknown.value.code == "not_found"
    reply = await controller.resolve_confirmation("k1", False, "reject_once")
    assert reply == {"confirmation_id": "k1", "approved": False, "option_id": "reject_once"}
    assert stream.resolutions == [("k1", False, "reject_once")]
    resolved = await next_event(queue, "confirmation_resolved")
    assert "message_id" not in resolved
    assert controller.snapshot()["confirmations"] == []
    with pytest.raises(InputError) as again:
        await controller.resolve_confirmation("k1", True)
    assert again.value.code == "already_resolved"


async def test_interrupt_stored_turn_reports_interrupted_stores_it_and_pauses(make: MakeController) -> None:
    store = RecordingStore()
    pending = [PendingItem(request("B"), order=1), PendingItem(request("C"), order=2)]
    controller = make(store=store, pending=pending, next_order=3, publish=store.publish)
    queue, _ = controller.subscribe()
    await controller.interrupt_stored_turn("A")
    event = queue.get_nowait()
    assert event["type"] == "result" and event["message_id"] == "A"
    assert event["data"] == {"status": "interrupted"}
    assert store.log == [("store", "A", "interrupted"), ("paused", "True"), ("event", "A", "result")]
    assert controller.paused and controller.active_task is None
    assert await controller.submit(request("D")) == {"message_id": "D", "status": "queued", "position": 2}


async def test_a_queue_loaded_from_storage_keeps_its_order_and_restores_by_it(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    loaded = [
        PendingItem(request("C"), order=7, steer_requested=True),
        PendingItem(request("B"), order=4),
    ]
    controller = make(pending=loaded, paused=True, next_order=8)
    assert [(i.request.message_id, i.steer_requested) for i in controller.pending] == [
        ("B", False),
        ("C", False),
    ]
    await controller.submit(request("D"))
    assert [item.order for item in controller.pending] == [4, 7, 8]
    await controller.steer("D")  # send now
    await runtime.stream_at(0)
    await controller.steer("B")
    await controller.cancel()
    assert [(item.request.message_id, item.order) for item in controller.pending] == [("B", 4), ("C", 7)]


async def test_every_state_change_is_stored_before_its_event_and_ack(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    store = RecordingStore()
    controller = make(store=store, publish=store.publish)

    async def act(label: str, command: Any) -> None:
        await command
        store.log.append(("ack", label))

    await act("A", controller.submit(request("A")))
    stream = await runtime.stream_at(0)
    await act("B", controller.submit(request("B")))
    await act("C", controller.submit(request("C")))
    await act("steer B", controller.steer("B"))
    await act("remove C", controller.remove("C"))
    stream.failure = RuntimeError("boom")
    task = controller.active_task
    stream.release()
    assert task is not None
    await task
    entries = [entry for entry in store.log if entry[0] != "event" or entry[2] != "delta"]
    assert entries == [
        ("store", "A", "running"),
        ("event", "A", "started"),
        ("ack", "A"),
        ("store", "B", "pending"),
        ("event", "B", "queued"),
        ("ack", "B"),
        ("store", "C", "pending"),
        ("event", "C", "queued"),
        ("ack", "C"),
        ("store", "B", "steered"),
        ("event", "B", "steered"),
        ("ack", "steer B"),
        ("store", "C", "removed"),
        ("event", "C", "removed"),
        ("ack", "remove C"),
        ("store", "A", "error"),
        ("store", "B", "pending"),
        ("paused", "True"),
        ("event", "B", "restored"),
        ("event", "A", "result"),
    ]


async def test_published_events_carry_increasing_seq_and_every_subscriber_sees_the_same_order(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    controller = make()
    first, _ = controller.subscribe()
    second, _ = controller.subscribe()
    await controller.submit(request("A"))
    await controller.submit(request("B"))
    (await runtime.stream_at(0)).release()
    stream = await runtime.stream_at(1)
    task = controller.active_task
    stream.release()
    assert task is not None
    await task
    events = drain(first)
    assert drain(second) == events
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["type"] for e in events] == [
        "message_status",
        "message_status",
        "delta",
        "final_answer",
        "result",
        "message_status",
        "delta",
        "final_answer",
        "result",
    ]


async def test_a_stored_message_handed_over_after_the_queue_loaded_it_runs_once(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    """Several processes: the process that received M stores it, then hands it to the owner; when the owner
    loaded the queue after M was stored (it took the session over meanwhile), M is there already. The
    hand-over is acknowledged and changes nothing: M does not run twice (found by bench/soak.py)."""
    controller = make(pending=[PendingItem(request("M"), order=0)], next_order=1)
    queue, _ = controller.subscribe()
    again = await controller.submit(request("M"), stored=True)
    assert again == {"message_id": "M", "status": "queued", "position": 0}
    assert [item.request.message_id for item in controller.pending] == ["M"]
    await controller.kick()
    stream = await runtime.stream_at(0)
    assert await controller.submit(request("M"), stored=True) == {"message_id": "M", "status": "started"}
    stream.release()
    await controller.submit(request("N"))  # runs after M: the queue goes on
    (await runtime.stream_at(1)).release()
    async with asyncio.timeout(2):
        while controller.active_task is not None:
            await asyncio.sleep(0.01)
    assert [status for status in statuses(drain(queue)) if status[1] != "queued"] == [
        ("message_status", "started", "M"),
        ("result", "completed", "M"),
        ("message_status", "started", "N"),
        ("result", "completed", "N"),
    ]
    assert [s.request.message_id for s in runtime.streams] == ["M", "N"]
    interrupted = make("two", next_order=0)
    await interrupted.interrupt_stored_turn("T")  # a turn it took over from a dead process
    assert (await interrupted.submit(request("T"), stored=True))["message_id"] == "T"
    assert interrupted.pending == [] and interrupted.active_task is None


async def test_stored_messages_adopted_from_storage_are_queued_once(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    """Messages stored while the owner could not be reached join the queue (the watchdog hands them over)
    once, in order, whatever else hands them over again."""
    controller = make()
    await controller.adopt([request("A"), request("B")])
    assert controller.active_request is not None and controller.active_request.message_id == "A"
    assert [item.request.message_id for item in controller.pending] == ["B"]
    await controller.adopt([request("A"), request("B")])
    assert await controller.submit(request("B"), stored=True) == {
        "message_id": "B",
        "status": "queued",
        "position": 0,
    }
    assert [item.request.message_id for item in controller.pending] == ["B"]
    (await runtime.stream_at(0)).release()
    (await runtime.stream_at(1)).release()
    async with asyncio.timeout(2):
        while controller.active_task is not None or controller.pending:
            await asyncio.sleep(0.01)
    await controller.adopt([request("A")])  # it ran already: not again
    assert controller.active_task is None and len(runtime.streams) == 2


async def test_a_duplicate_refused_here_does_not_keep_the_stored_message_from_its_queue(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    """A client sends M again (same id) while M's row, stored by another process, waits for adoption: the
    resend is refused as a duplicate, and M is still adopted and run."""
    store = RecordingStore()
    store.statuses["M"] = "pending"  # stored by the process that received it
    controller = make(store=store, publish=store.publish)
    with pytest.raises(InputError):
        await controller.submit(request("M"))
    await controller.adopt([request("M")])
    assert controller.active_request is not None and controller.active_request.message_id == "M"


class EnteredOnce:
    """A runtime that notes in the store's log when it is entered and when its stream is opened."""

    def __init__(self, log: list[tuple[str, ...]]) -> None:
        self.log = log
        self.openings: list[Any] = []
        self.inner = ScriptedRuntime(auto_release=True)
        self.inner.gate.clear()

    def stream(self, request: ChatRequest, *, session_id: str, token: int | None = None) -> Any:
        self.log.append(("entered", request.message_id))

        async def opening() -> Any:
            self.log.append(("opened", request.message_id))
            return await self.inner.stream(request, session_id=session_id, token=token)

        self.openings.append(opening())
        return self.openings[-1]


async def test_a_turn_enters_the_runtime_once_before_its_message_is_stored_and_opens_inside_its_lease() -> (
    None
):
    """The runtime's one entry (agents/contract.py Runtime.stream) is called as the turn starts, so that
    its I/O runs alongside the write of the message; the stream is opened once the turn has its lease."""
    store = RecordingStore()
    runtime = EnteredOnce(store.log)
    controller = SessionController("one", runtime=runtime, lease=runtime.inner.lease, store=store)
    await controller.submit(request("A"))
    assert store.log[:2] == [("entered", "A"), ("store", "A", "running")]
    assert ("opened", "A") not in store.log  # the lease is held
    runtime.inner.gate.set()
    task = controller.active_task
    assert task is not None
    await task
    assert [entry for entry in store.log if entry[0] in {"entered", "opened"}] == [
        ("entered", "A"),
        ("opened", "A"),
    ]
    await controller.close()


async def test_a_turn_cancelled_before_its_lease_closes_what_it_never_opened() -> None:
    store = RecordingStore()
    runtime = EnteredOnce(store.log)
    controller = SessionController("one", runtime=runtime, lease=runtime.inner.lease, store=store)
    await controller.submit(request("A"))
    await controller.cancel()
    assert [inspect.getcoroutinestate(opening) for opening in runtime.openings] == [inspect.CORO_CLOSED]
    assert ("opened", "A") not in store.log and store.statuses["A"] == "cancelled"
    await controller.close()


async def test_a_final_answer_carries_its_markdown_as_html_rendered_when_the_turn_ends(
    make: MakeController, runtime: ScriptedRuntime
) -> None:
    """The html is rendered once, with the final text (chat/live/outcomes.py final_answer), not by a
    wrapper every published event goes through: the controller's own events carry it."""
    published: list[dict[str, Any]] = []
    controller = make(publish=lambda event: published.append(event) or event)
    await controller.submit(request("A", "**bold** <script>x</script>"))
    (await runtime.stream_at(0)).release()
    task = controller.active_task
    assert task is not None
    await task
    (final,) = [event for event in published if event["type"] == "final_answer"]
    assert final["html"] == render_markdown(final["content"]) and "<strong>" in final["html"]
    assert "<script>" not in final["html"]
    assert all("html" not in event for event in published if event["type"] != "final_answer")
