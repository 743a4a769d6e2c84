"""Database access from async code.

Django recommends closing connections after each use under ASGI (every request runs in a thread of its
own, so persistent connections pile up) and pooling instead: settings.py does that (CONN_MAX_AGE=0,
psycopg's pool on Postgres). Channels' `database_sync_to_async` follows it and closes the connection
after every call — on the hot path of a chat turn that reconnect cost more than the queries
(bench/README.md). Our async code runs its ORM calls in asgiref's one shared database thread instead and
keeps that thread's connection open between calls; a connection that failed is closed, so the next call
opens a fresh one.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, connection


def database_sync_to_async[**P, R](fn: Callable[P, R]) -> Callable[P, Any]:
    @wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (InterfaceError, OperationalError):
            if connection.connection is not None and not connection.is_usable():
                connection.close()
            raise

    return sync_to_async(call, thread_sensitive=True)
