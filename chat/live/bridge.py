"""Calling the live sessions from synchronous code (a DRF view) on the event loop."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

from asgiref.sync import async_to_sync


async def _in_fresh_context[T](call: Callable[..., Coroutine[Any, Any, T]], *args: Any, **kwargs: Any) -> T:
    return await asyncio.create_task(call(*args, **kwargs), context=contextvars.Context())


def call_from_sync[T](call: Callable[..., Coroutine[Any, Any, T]], *args: Any, **kwargs: Any) -> T:
    """Run a live-sessions coroutine from sync code (a DRF view) on the event loop, in a fresh context.

    A queue command may start a turn task that outlives the request. Tasks copy the caller's
    context, and under async_to_sync that context holds the request's asgiref executors
    (AsyncToSync.executors, ThreadSensitiveContext); once the view returns they are gone, and every
    database call of the turn would fail ("CurrentThreadExecutor already quit"). A fresh context
    makes such tasks use the process-wide database thread, as turns started from sockets do.
    """
    return async_to_sync(_in_fresh_context)(call, *args, **kwargs)
