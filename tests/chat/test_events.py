"""chat.events: the frame encoding, and EventQueue, the slim subscriber queue behind every socket, SSE
stream and cron watcher."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import decimal
import json
import uuid
from typing import Any

import pytest

from agentsite.eventqueue import EventQueue
from chat.live.events import encode_event
from tests.support.stack import speed_layer_only


@dataclasses.dataclass
class Point:
    x: int
    y: int


class _Opaque:
    def __str__(self) -> str:
        return "opaque!"


@pytest.mark.parametrize(
    "event",
    [
        {"type": "delta", "content": 'héllo ✓ 中文 🙂 "quoted" \\ \n\t', "message_id": "m", "seq": 7},
        {
            "type": "result",
            "data": {"status": "completed", "usage": {"total_tokens": 12}, "x": [1.5, None, True]},
        },
        {
            "type": "snapshot",
            "when": dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC),
            "day": dt.date(2026, 1, 2),
        },
        {"type": "odd", "keys": {1: "int key", 2.5: "float key"}, "big": 2**70, "other": _Opaque()},
        {"type": "dc", "value": Point(1, 2), "dec": decimal.Decimal("1.10"), "id": uuid.UUID(int=5)},
        {"type": "control", "content": "\u2028\u2029\x00\x1f"},
    ],
)
def test_frames_are_encoded_exactly_like_json_dumps(event: dict[str, object]) -> None:
    expected = json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str)
    assert encode_event(event) == expected


async def test_items_come_out_in_order_and_a_waiting_reader_wakes_up() -> None:
    queue = EventQueue()
    reader = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    assert not reader.done()
    queue.put_nowait({"seq": 1})
    queue.put_nowait({"seq": 2})
    assert await asyncio.wait_for(reader, 1) == {"seq": 1}
    assert queue.qsize() == 1 and not queue.empty()
    assert queue.get_nowait() == {"seq": 2}
    assert queue.empty() and queue.qsize() == 0
    with pytest.raises(asyncio.QueueEmpty):
        queue.get_nowait()


async def test_a_reader_that_gives_up_leaves_the_queue_usable() -> None:
    queue = EventQueue()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), 0.01)
    queue.put_nowait("after")
    assert await asyncio.wait_for(queue.get(), 1) == "after"
    reader = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    queue.put_nowait("again")
    assert await asyncio.wait_for(queue.get(), 1) == "again"


@speed_layer_only
async def test_long_bursts_keep_order_and_release_what_was_read() -> None:
    queue = EventQueue()
    for n in range(1000):
        queue.put_nowait(n)
    taken = [queue.get_nowait() for _ in range(600)]
    for n in range(1000, 1200):
        queue.put_nowait(n)
    taken += [await queue.get() for _ in range(600)]
    assert taken == list(range(1200)) and queue.empty()
    assert queue._items == [] and queue._head == 0  # nothing read is kept


@speed_layer_only
async def test_a_reader_that_never_quite_catches_up_does_not_keep_what_it_read() -> None:
    queue = EventQueue()
    queue.put_nowait(0)
    for n in range(1, 5000):
        queue.put_nowait(n)
        assert queue.get_nowait() == n - 1
    assert queue.qsize() == 1 and len(queue._items) < 2100


def _run(log: Any, message_id: str, deltas: int, size: int = 1000) -> None:
    log.publish({"type": "message_status", "message_id": message_id, "status": "started"})
    for _ in range(deltas):
        log.publish({"type": "delta", "content": "x" * size, "message_id": message_id})
    log.publish({"type": "result", "message_id": message_id, "data": {"status": "completed"}})


def test_a_session_keeps_its_older_events_within_a_byte_budget_but_its_last_two_runs_whole() -> None:
    """Issue 18: what a live session keeps is bounded by bytes, not only by count; the running and the
    last finished run are always kept (docs/protocol.md §3.1)."""
    from chat.live.events import EventLog, event_size

    log = EventLog("s", last_seq=0, reserved=10**9, retention=10_000, retention_bytes=20_000)
    for n in range(5):
        _run(log, f"m{n}", deltas=10)
    assert log.bytes <= 20_000 + 12 * event_size({"type": "delta", "content": "x" * 1000})
    assert log.replay(0) is None, "the oldest runs are gone"
    starts = [e["seq"] for e in log.replay(log.floor) or [] if e.get("status") == "started"]
    assert len(starts) >= 2 and log.replay(starts[-2] - 1) is not None, "the last two runs are whole"
    big = EventLog("b", last_seq=0, reserved=10**9, retention=10_000, retention_bytes=20_000)
    _run(big, "huge", deltas=100)
    assert big.replay(0) is not None and big.bytes > 100_000, "the running/last run is never trimmed"
    assert big.bytes == sum(event_size(e) for e in big.replay(0) or [])


def test_idle_sessions_keep_their_last_runs_within_a_byte_budget(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import time

    from chat.live import registry as registry_module
    from chat.live.events import EventLog

    monkeypatch.setattr(registry_module, "DORMANT_BYTES_KEPT", 50_000)
    registry = registry_module.LiveRegistry(runtime=object(), load=None)  # type: ignore[arg-type]
    for n in range(6):
        log = EventLog(f"s{n}", last_seq=0, reserved=10**9)
        _run(log, "m", deltas=15)  # ~19 KB each
        log.touched = time.monotonic() + n
        registry.logs[f"s{n}"] = log
    registry.cap_dormant_logs()
    assert sorted(registry.logs) == ["s4", "s5"], "the most recently used ones that fit stay"


def test_the_byte_budget_of_idle_sessions_is_walked_at_most_once_a_second(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue 18: the cap runs after every chat of a chat-per-request integration; within the count of logs
    kept, the walk over every log's bytes happens once a second (past the count, at once)."""
    from chat.live import registry as registry_module
    from chat.live.events import EventLog

    clock = [1000.0]
    monkeypatch.setattr(registry_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(registry_module, "DORMANT_BYTES_KEPT", 50_000)
    registry = registry_module.LiveRegistry(runtime=object(), load=None)  # type: ignore[arg-type]

    def add(name: str) -> None:
        log = EventLog(name, last_seq=0, reserved=10**9)
        _run(log, "m", deltas=15)  # ~19 KB
        log.touched = clock[0]
        registry.logs[name] = log

    add("s0")
    registry.cap_dormant_logs()
    for n in range(1, 4):
        add(f"s{n}")
    registry.cap_dormant_logs()
    assert len(registry.logs) == 4, "within the second and the count: not walked"
    clock[0] += 1.0
    registry.cap_dormant_logs()
    assert sorted(registry.logs) == ["s2", "s3"], "a second later, the byte budget holds again"
    for n in range(4, 8):
        add(f"s{n}")
    registry.cap_dormant_logs(kept=3)
    assert len(registry.logs) <= 3, "past the count, at once"
