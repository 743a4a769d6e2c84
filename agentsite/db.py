"""Database access from async code: one database thread, fed in batches.

Django recommends closing connections after each use under ASGI (every request runs in a thread of its
own, so persistent connections pile up) and pooling instead: settings.py does that (CONN_MAX_AGE=0,
psycopg's pool on Postgres). Channels' `database_sync_to_async` follows it and closes the connection
after every call — on the hot path of a chat turn that reconnect cost more than the queries
(bench/README.md). Our async code runs its ORM calls in asgiref's one shared database thread instead and
keeps that thread's connection open between calls; a connection that failed is closed, so the next call
opens a fresh one.

Handing a call to a thread and its result back costs ~100 µs of CPU (futures, a wake-up of each thread,
the GIL changing hands twice), more than a simple query. So calls are not handed over one by one: calls
made while the thread is busy wait in a queue and go over together, and their results come back
together, in one hand-over each way (the order of calls is kept). Under load — many sessions streaming at
once — that turns dozens of hand-overs into one; alone, a call costs what it did.

When the database does not answer, the first call that cannot open a connection finds out (waiting up
to the pool's timeout) and the calls after it fail at once with the same error for a moment
(`DOWN_SECONDS`) instead of each waiting as long again: a turn whose write fails is then told within
seconds, not after every queued call of the process has timed out in turn (docs/deployment.md, Outages).

Where asgiref would pick another thread — a sync caller waiting in `async_to_sync` (its own thread, and
its transaction), a request's ThreadSensitiveContext — the call goes through `sync_to_async` unchanged.
What this uses of asgiref's private parts is in agentsite/internals.py. On the stock stack
(AGENTSITE_STOCK_STACK=1, agentsite/stack.py) none of this runs: `database_sync_to_async` is Channels' own,
which runs each call in asgiref's thread and cleans up old connections before and after it (with
CONN_MAX_AGE=0: a new connection per call), and a database that does not answer costs every call its own
wait. The hot-path SQL helpers below are plain Django and serve both stacks.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async as channels_database_sync_to_async
from django.db import InterfaceError, OperationalError, connection
from django.db.models import Field, Model

from agentsite.stack import STOCK_STACK

if not STOCK_STACK:
    from agentsite.internals import asgiref_picks_another_thread, bind_thread_to, run_in_database_thread

# (function, args, kwargs, context, future) of one call
_Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], contextvars.Context, asyncio.Future[Any]]


DOWN_SECONDS = 1.0  # after a failed connection, calls fail at once for this long, then one tries again


def _close_if_broken() -> None:
    if connection.connection is not None and not connection.is_usable():
        connection.close()


class _DatabaseThread:
    """The batching hand-over to asgiref's single database thread, for one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: list[_Call] = []
        self.busy = False
        self.down: tuple[float, BaseException] | None = None  # (until, error) after a failed connection

    def call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> asyncio.Future[Any]:
        future = self.loop.create_future()
        self.waiting.append((fn, args, kwargs, contextvars.copy_context(), future))
        if not self.busy:
            # Handed over once the callbacks running now are done: calls made together go together.
            self.busy = True
            self.loop.call_soon(self._hand_over)
        return future

    def _hand_over(self) -> None:
        batch, self.waiting = self.waiting, []
        run_in_database_thread(functools.partial(self._run, batch))

    def _run(self, batch: list[_Call]) -> None:
        """In the database thread: every call of the batch in order, then all results back at once."""
        bind_thread_to(self.loop)
        outcomes: list[tuple[bool, Any]] = []
        for fn, args, kwargs, context, _future in batch:
            if self.down is not None and time.monotonic() < self.down[0]:
                outcomes.append((False, OperationalError(f"The database does not answer ({self.down[1]}).")))
                continue
            connected = connection.connection is not None
            try:
                outcomes.append((True, context.run(fn, *args, **kwargs)))
            except BaseException as exc:  # handed to the caller, whatever it is
                if isinstance(exc, (InterfaceError, OperationalError)):
                    _close_if_broken()
                    if not connected and connection.connection is None:  # no new connection could be had
                        self.down = (time.monotonic() + DOWN_SECONDS, exc)
                outcomes.append((False, exc))
            else:
                self.down = None
        self.loop.call_soon_threadsafe(self._done, batch, outcomes)

    def _done(self, batch: list[_Call], outcomes: list[tuple[bool, Any]]) -> None:
        for (*_, future), (ok, value) in zip(batch, outcomes, strict=True):
            if future.cancelled():
                continue  # the caller stopped waiting; the call itself ran (a thread cannot be interrupted)
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        if self.waiting:
            self._hand_over()
        else:
            self.busy = False


_threads: dict[asyncio.AbstractEventLoop, _DatabaseThread] = {}


def _database_thread(loop: asyncio.AbstractEventLoop) -> _DatabaseThread:
    thread = _threads.get(loop)
    if thread is None:
        for old in [old for old in _threads if old.is_closed()]:
            del _threads[old]  # loops of finished tests or commands
        thread = _threads[loop] = _DatabaseThread(loop)
    return thread


def _batched_database_sync_to_async[**P, R](fn: Callable[P, R]) -> Callable[P, Any]:
    """`fn` as a coroutine function that runs in the database thread (see the module docstring)."""

    @wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (InterfaceError, OperationalError):
            _close_if_broken()
            raise

    @wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        loop = asyncio.get_running_loop()
        if asgiref_picks_another_thread(loop):
            return await sync_to_async(call, thread_sensitive=True)(*args, **kwargs)
        return await _database_thread(loop).call(fn, args, kwargs)  # type: ignore[no-any-return]

    return run


def _batched_database_call[**P, R](
    fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs
) -> asyncio.Future[R]:
    """Queue `fn(*args, **kwargs)` for the database thread now and return its future (a running loop
    is needed). Unlike a coroutine, which only queues the call once awaited, this lets one task put
    several independent calls into the same hand-over: `await asyncio.gather(database_call(a),
    database_call(b))`."""
    loop = asyncio.get_running_loop()
    if asgiref_picks_another_thread(loop):
        return asyncio.ensure_future(_batched_database_sync_to_async(fn)(*args, **kwargs))
    return _database_thread(loop).call(fn, args, kwargs)


def _stock_database_call[**P, R](fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> asyncio.Future[R]:
    """The stock stack's `database_call`: Channels' `database_sync_to_async`, started now."""
    return asyncio.ensure_future(channels_database_sync_to_async(fn)(*args, **kwargs))


# Chosen once, here (agentsite/stack.py); the type checker reads the speed layer's, whose signatures the
# stock stack's share.
if TYPE_CHECKING or not STOCK_STACK:
    database_sync_to_async = _batched_database_sync_to_async
    database_call = _batched_database_call
else:
    database_sync_to_async = channels_database_sync_to_async
    database_call = _stock_database_call


async def close_connection() -> None:
    """Close the database thread's connection (server shutdown): it is otherwise kept between calls."""
    await database_sync_to_async(_close)()


def _close() -> None:
    connection.close()  # `connection` resolves to the calling thread's connection: call it in the thread


# -- statements on the hot path of a chat turn, without the ORM's query building ------------------------
# Building a query costs the ORM 200–350 µs of CPU; the statement itself costs SQLite 5–20 µs. The few
# statements every message runs go through these helpers (sync: call them in the database thread). They
# serve both stacks; what they use of the ORM's compiler is listed in agentsite/private_names.py (trick 8).


@functools.cache
def _insert_statement(
    model: type[Model], vendor: str
) -> tuple[str, tuple[Field[Any, Any], ...], frozenset[str]]:
    fields = tuple(field for field in model._meta.concrete_fields if not field.primary_key)
    quote = connection.ops.quote_name
    columns = ", ".join(quote(str(field.column)) for field in fields)
    placeholders = ", ".join("%s" for _ in fields)
    sql = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({placeholders})"
    return sql, fields, frozenset(field.attname for field in fields)


def insert_row(model: type[Model], /, **values: Any) -> None:
    """`model.objects.create(**values)` for models without signals or save() logic, keyed by attname
    (`session_id`, not `session`); fields not given get their defaults. Values are prepared by their
    fields, so JSON, dates and booleans are stored exactly as the ORM stores them."""
    sql, fields, names = _insert_statement(model, connection.vendor)
    if not names.issuperset(values):
        raise TypeError(f"{model.__name__} has no field(s) {sorted(set(values) - names)}")
    params = [
        field.get_db_prep_save(
            values[field.attname] if field.attname in values else field.get_default(), connection
        )
        for field in fields
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@functools.cache
def _update_statement(
    model: type[Model], names: tuple[str, ...], keys: tuple[str, ...], vendor: str
) -> tuple[str, tuple[Field[Any, Any], ...], tuple[Field[Any, Any], ...]]:
    quote = connection.ops.quote_name
    meta = model._meta
    fields = tuple(meta.get_field(name) for name in names)
    where = tuple(meta.get_field(name) for name in keys)
    assignments = ", ".join(f"{quote(str(field.column))} = %s" for field in fields)  # type: ignore[union-attr]
    conditions = " AND ".join(f"{quote(str(field.column))} = %s" for field in where)  # type: ignore[union-attr]
    return f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {conditions}", fields, where  # type: ignore[return-value]


def update_rows(model: type[Model], /, where: dict[str, Any], **values: Any) -> int:
    """`model.objects.filter(**where).update(**values)` for equality conditions, keyed by attname, as one
    statement (no signals, no `auto_now`: give such fields their value); returns the rows updated. Values
    are prepared by their fields, as the ORM prepares them."""
    sql, fields, keys = _update_statement(model, tuple(values), tuple(where), connection.vendor)
    params = [
        field.get_db_prep_save(value, connection)
        for field, value in zip(fields, values.values(), strict=True)
    ]
    params += [
        field.get_db_prep_value(value, connection) for field, value in zip(keys, where.values(), strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


@functools.cache
def _select_statement(
    model: type[Model], keys: tuple[str, ...], vendor: str
) -> tuple[
    str, tuple[str, ...], tuple[tuple[Any, tuple[Callable[..., Any], ...]], ...], tuple[Field[Any, Any], ...]
]:
    quote = connection.ops.quote_name
    meta = model._meta
    fields = tuple(meta.concrete_fields)
    where = tuple(meta.get_field(name) for name in keys)
    columns = ", ".join(quote(str(field.column)) for field in fields)
    conditions = " AND ".join(f"{quote(str(field.column))} = %s" for field in where)  # type: ignore[union-attr]
    sql = f"SELECT {columns} FROM {quote(meta.db_table)} WHERE {conditions}"
    # What the ORM's compiler applies to each column it reads (the backend's and the field's converters).
    converting = []
    for field in fields:
        column = field.get_col(meta.db_table)
        converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        converting.append((column, tuple(converters)))
    return sql, tuple(field.attname for field in fields), tuple(converting), where  # type: ignore[return-value]


def select_row[M: Model](model: type[M], /, **where: Any) -> M | None:
    """`model.objects.filter(**where).first()` without its ordering, for equality conditions keyed by attname
    that match at most one row, as one prepared statement: the instance the ORM would load, or None."""
    sql, names, converting, keys = _select_statement(model, tuple(where), connection.vendor)
    params = [
        field.get_db_prep_value(value, connection) for field, value in zip(keys, where.values(), strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    values = []
    for value, (column, converters) in zip(row, converting, strict=True):
        for convert in converters:
            value = convert(value, column, connection)
        values.append(value)
    return model.from_db(connection.alias, names, values)
