"""The speed tricks of agentsite/internals.py still find the private parts of asgiref and Channels they use.

If this fails after an upgrade, do not silence it: read agentsite/internals.py, check what the library
changed, and adapt the trick (or drop it and measure again, bench/).
"""

from __future__ import annotations

import asyncio
import inspect

from asgiref.sync import SyncToAsync
from channels.consumer import AsyncConsumer

from agentsite import internals


def test_every_private_name_the_tricks_use_is_still_there() -> None:
    assert internals.missing() == []


def test_the_names_still_mean_what_the_tricks_assume() -> None:
    # The shared database thread is an executor with one worker that takes callables.
    assert SyncToAsync.single_thread_executor._max_workers == 1
    # Channels' consumer entry point still takes (scope, receive, send), which the lean consumer replaces.
    assert list(inspect.signature(AsyncConsumer.__call__).parameters) == ["self", "scope", "receive", "send"]
    assert inspect.iscoroutinefunction(internals.channels_utils.await_many_dispatch)
    assert internals.channels_consumer.get_handler_name({"type": "websocket.receive"}) == "websocket_receive"


async def test_outside_a_sync_caller_asgiref_would_use_the_shared_thread() -> None:
    assert internals.asgiref_picks_another_thread(asyncio.get_running_loop()) is False


def test_the_check_reports_what_is_gone(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(
        internals, "PRIVATE_NAMES", (*internals.PRIVATE_NAMES, (SyncToAsync, "no_such_thing"))
    )
    assert internals.missing() == ["SyncToAsync.no_such_thing"]
