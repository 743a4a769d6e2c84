"""chat.events: the frame encoding, and EventQueue, the slim subscriber queue behind every socket, SSE
stream and cron watcher."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import decimal
import json
import uuid

import pytest

from agentsite.eventqueue import EventQueue
from chat.live.events import encode_event


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


async def test_a_reader_that_never_quite_catches_up_does_not_keep_what_it_read() -> None:
    queue = EventQueue()
    queue.put_nowait(0)
    for n in range(1, 5000):
        queue.put_nowait(n)
        assert queue.get_nowait() == n - 1
    assert queue.qsize() == 1 and len(queue._items) < 2100
