"""Open connections follow the account they authenticated with (docs/protocol.md §6.2).

A socket (or an SSE stream) authenticates once, when it opens: with an API key, or with the browser
session of its cookie. That is its `Credential`. When the credential ends — its user is deactivated or
deleted, its key is revoked, expires or is deleted, its browser session logs out or expires, or the
password that browser session logged in with changes — every
connection holding it is told (`account_ended(reason)`: a socket sends `error unauthorized` and closes
with 4401) within 2 s, on every server process, whichever process or tool made the change:

- A change made through Django (a request on any process, the admin, `manage.py shell`, a command) sends
  `account.ended`, saying what ended, to ACCOUNTS_GROUP on the channel layer once it commits
  (accounts/signals.py); every server process listens there (`AccountWatch`) and ends the matching
  connections at once, without a query. With REDIS_URL every process hears it; the in-memory layer
  reaches the process that made the change.
- The rest — a `manage.py shell` on SQLite (its in-memory layer reaches no server), a raw SQL UPDATE, a
  key's `expires_at` passing, a session's expiry, a password change — the sweep finds: every second, one
  check of every open connection's credential (one hand-over to the database thread, a query per kind of
  credential in use; nothing when no connection is open).
Frames themselves are never checked: the frame path does no query for the account.
A user deactivated or deleted also stops working: their turns running in a process that hears the event
(or whose sweep finds it) stop (chat/live/sessions.py), and their turns that would start are refused.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import hashlib
import logging
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Protocol

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, get_user_model
from django.db import InterfaceError, OperationalError, transaction
from django.db import connection as database
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from accounts.models import ApiKey, hash_key, key_refusal
from agentsite.db import database_call, table

logger = logging.getLogger(__name__)

ACCOUNTS_GROUP = "agentsite.accounts"
# {"type", "user_id": int, "reason": str, "key_hash"?: str, "session"?: session_digest(key)}: the user's
# connections end; only those of that key or that browser session when one is named.
ACCOUNT_ENDED = "account.ended"
SWEEP_SECONDS = 1.0
PUBLISH_SECONDS = 2.0  # a change is never held up longer than this by a layer that does not answer
# The in-memory layer forgets a group's members after a day (group_expiry): the watch joins again hourly.
REJOIN_SECONDS = 3600.0
CHUNK = 500  # values per IN (...) list

# What a client is told; each names the api_key (the contract's words for `unauthorized`).
USER_ENDED = "The account was deactivated or deleted: neither its api_key nor its login works any more."
KEY_ENDED = {
    "revoked": "The api_key was revoked.",
    "expired": "The api_key has expired.",
    None: "The api_key was deleted.",
}
SESSION_ENDED = "The browser session ended (logged out or expired): log in again, or use an api_key."
PASSWORD_CHANGED = "The account's password changed: log in again with the new one, or use an api_key."
_DATABASE_SESSIONS = {"django.contrib.sessions.backends.db", "django.contrib.sessions.backends.cached_db"}


@dataclass(frozen=True, slots=True)
class Credential:
    """What a connection authenticated with: its user, and the key or browser session (or neither: open
    mode's built-in user). A browser session's `session_hash` is the password hash it logged in with
    (Django's `_auth_user_hash`): once the password changes, it no longer authenticates."""

    user_id: int
    key_hash: str | None = None
    session_key: str | None = None
    session_hash: str | None = None

    @classmethod
    def of_key(cls, user_id: int, secret: str) -> Credential:
        return cls(user_id, key_hash=hash_key(secret))

    @classmethod
    def of_session(cls, user_id: int, session: Any) -> Credential:
        """A logged-in browser session's (`request.session`, `scope["session"]`: already loaded)."""
        return cls(user_id, session_key=session.session_key, session_hash=session.get(HASH_SESSION_KEY))


class Connection(Protocol):
    def account_ended(self, reason: str) -> None:
        """Its credential ended: tell the client `reason` and close (no await: called from the watch)."""


def session_digest(session_key: str) -> str:
    """How a browser session is named in events (its key is a secret: it never leaves the process)."""
    return hashlib.sha256(session_key.encode()).hexdigest()


def _digest_of(credential: Credential) -> str | None:
    return session_digest(credential.session_key) if credential.session_key is not None else None


def _rows(
    model: Any, columns: tuple[str, ...], key: str, values: Collection[Any]
) -> Iterator[tuple[Any, ...]]:
    """`SELECT columns FROM model WHERE key IN (values)`, CHUNK values a statement, in SQL: the ORM's
    preparation of a long IN list costs several times the statement (bench/README.md, frame_path.py)."""
    quote, meta = database.ops.quote_name, model._meta
    column = {**{field.name: field.column for field in meta.concrete_fields}, "pk": meta.pk.column}
    selected = ", ".join(quote(column[name]) for name in columns)
    where = quote(column[key])
    items = list(values)
    with database.cursor() as cursor:
        for start in range(0, len(items), CHUNK):
            chunk = items[start : start + CHUNK]
            marks = ", ".join(["%s"] * len(chunk))
            cursor.execute(f"SELECT {selected} FROM {table(model)} WHERE {where} IN ({marks})", chunk)
            yield from cursor.fetchall()


def _password_stale(password: str, session_hash: str) -> bool:
    """Whether a browser session logged in with `session_hash` no longer matches the user's password: as
    Django's own check of a request (`django.contrib.auth.get_user`), with SECRET_KEY_FALLBACKS."""
    return not any(constant_time_compare(session_hash, known) for known in _session_hashes(password))


@functools.lru_cache(maxsize=4096)
def _session_hashes(password: str) -> tuple[str, ...]:
    """The session hashes a stored password allows (computed once per password, not every second)."""
    user = get_user_model()(password=password)
    return (user.get_session_auth_hash(), *user.get_session_auth_fallback_hash())


def _utc(value: datetime | None) -> datetime | None:
    """A time as read in SQL: SQLite's are naive (stored in UTC), Postgres' aware."""
    return value.replace(tzinfo=dt.UTC) if value is not None and value.tzinfo is None else value


def credentials_ended(credentials: Collection[Credential], *, now: datetime) -> dict[Credential, str]:
    """The credentials among these that no longer authenticate, each with the sentence its client is told.

    The same rules as a new request's (accounts/services.py `api_key_authenticate`, Django's session
    authentication): an inactive or missing user, a key that `key_refusal` refuses or that is gone, a
    browser session that is gone or past its expiry, or that logged in before the password changed. A
    statement per kind of credential in use."""
    user_model = get_user_model()
    user_ids = {c.user_id for c in credentials}
    passwords = {
        pk: password
        for pk, is_active, password in _rows(user_model, ("pk", "is_active", "password"), "pk", user_ids)
        if is_active
    }
    active = passwords.keys()
    key_hashes = {c.key_hash for c in credentials if c.key_hash is not None and c.user_id in active}
    refused: dict[str, str] = {key_hash: KEY_ENDED[None] for key_hash in key_hashes}
    for key_hash, revoked_at, expires_at in _rows(
        ApiKey, ("key_hash", "revoked_at", "expires_at"), "key_hash", key_hashes
    ):
        refusal = key_refusal(revoked_at=_utc(revoked_at), expires_at=_utc(expires_at), now=now)
        if refusal is None:
            del refused[key_hash]
        else:
            refused[key_hash] = KEY_ENDED[refusal]
    session_keys = {c.session_key for c in credentials if c.session_key is not None and c.user_id in active}
    gone: set[str] = set()
    if session_keys and settings.SESSION_ENGINE in _DATABASE_SESSIONS:
        # Other engines (cache, signed cookies) cannot be read in bulk: their sockets follow the user and
        # logouts (the event), not a session's expiry.
        from django.contrib.sessions.models import Session

        rows = _rows(Session, ("session_key", "expire_date"), "session_key", session_keys)
        alive = {key for key, expire_date in rows if (_utc(expire_date) or now) > now}
        gone = session_keys - alive
    ended: dict[Credential, str] = {}
    for credential in credentials:
        if credential.user_id not in active:
            ended[credential] = USER_ENDED
        elif credential.key_hash is not None and credential.key_hash in refused:
            ended[credential] = refused[credential.key_hash]
        elif credential.session_key is not None and credential.session_key in gone:
            ended[credential] = SESSION_ENDED
        elif credential.session_hash is not None and _password_stale(
            passwords[credential.user_id], credential.session_hash
        ):
            ended[credential] = PASSWORD_CHANGED
    return ended


# -- telling the server processes -----------------------------------------------------------------------


def credential_ended(
    user_id: int, *, reason: str, key_hash: str | None = None, session_key: str | None = None
) -> None:
    """Once the current transaction commits, tell every server process that a credential of this user
    ended: all of them, or only `key_hash` or only the browser session `session_key`. Best effort: when the
    layer does not answer, the sweep still finds the change within a second (except a logout under a
    session engine that does not keep sessions in the database)."""
    message: dict[str, Any] = {"type": ACCOUNT_ENDED, "user_id": user_id, "reason": reason}
    if key_hash is not None:
        message["key_hash"] = key_hash
    if session_key:
        message["session"] = session_digest(session_key)
    transaction.on_commit(partial(_publish, message))


def _publish(message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(_send)(layer, message)
    except Exception as exc:  # never fail the change itself: the sweep is the safety net
        logger.warning(
            "could not tell the server processes that a credential of user %s ended (%s: %s); the sweep will",
            message["user_id"],
            type(exc).__name__,
            exc,
        )


async def _send(layer: Any, message: dict[str, Any]) -> None:
    await asyncio.wait_for(layer.group_send(ACCOUNTS_GROUP, message), PUBLISH_SECONDS)


# -- this process's open connections ------------------------------------------------------------------------


class AccountWatch:
    """This process's open connections by credential; ends those whose credential ended.

    Owned by the live sessions (chat/live/sessions.py), started and stopped with them. Bounded by the
    open connections: each is added once it is open and discarded when it goes (or when it was ended).
    """

    def __init__(
        self, *, every: float = SWEEP_SECONDS, on_user_ended: Callable[[int], None] | None = None
    ) -> None:
        self.every = every
        # Called with a user id when the user was deactivated or deleted (the event, or the sweep finding it).
        self.on_user_ended = on_user_ended
        self._credentials: dict[Connection, Credential] = {}
        self._by_user: dict[int, set[Connection]] = {}
        self._layer: Any = None
        self._channel = ""
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._credentials)

    def add(self, connection: Connection, credential: Credential) -> None:
        self._credentials[connection] = credential
        self._by_user.setdefault(credential.user_id, set()).add(connection)

    def discard(self, connection: Connection) -> None:
        credential = self._credentials.pop(connection, None)
        if credential is None:
            return
        others = self._by_user.get(credential.user_id)
        if others is not None:
            others.discard(connection)
            if not others:
                del self._by_user[credential.user_id]

    async def start(self) -> None:
        self._layer = get_channel_layer()
        if self._layer is not None:
            self._channel = await self._layer.new_channel("agentsite.accounts.")
            await self._layer.group_add(ACCOUNTS_GROUP, self._channel)
            self._spawn(self._listen())
        self._spawn(self._sweep_forever())

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._channel:
            try:
                await self._layer.group_discard(ACCOUNTS_GROUP, self._channel)
            except Exception:  # the layer is away: its membership goes with this process
                logger.debug("leaving %s failed", ACCOUNTS_GROUP, exc_info=True)
            self._channel = ""
        self._credentials.clear()
        self._by_user.clear()

    async def check(self) -> int:
        """Check every open connection's credential (the sweep) and end those that ended; how many."""
        if not self._credentials:
            return 0
        pairs = list(self._credentials.items())
        credentials = {credential for _, credential in pairs}
        ended = await database_call(credentials_ended, credentials, now=timezone.now())
        for user_id in {credential.user_id for credential, reason in ended.items() if reason == USER_ENDED}:
            self._user_ended(user_id)
        return self._end(
            (connection, ended[credential]) for connection, credential in pairs if credential in ended
        )

    def ended(
        self, user_id: int, reason: str, *, key_hash: str | None = None, session: str | None = None
    ) -> int:
        """`account.ended`: the user's connections end — only those of `key_hash`, or of the browser session
        whose digest is `session`, when one is given."""
        if reason == USER_ENDED:
            self._user_ended(user_id)
        matching = [
            connection
            for connection in self._by_user.get(user_id, ())
            if (key_hash is None or self._credentials[connection].key_hash == key_hash)
            and (session is None or _digest_of(self._credentials[connection]) == session)
        ]
        return self._end((connection, reason) for connection in matching)

    def _user_ended(self, user_id: int) -> None:
        if self.on_user_ended is not None:
            try:
                self.on_user_ended(user_id)
            except Exception:
                logger.exception("stopping the work of user %s failed", user_id)

    def _end(self, ended: Iterable[tuple[Connection, str]]) -> int:
        count = 0
        for connection, reason in ended:
            if connection in self._credentials:  # not ended, nor gone, meanwhile
                self.discard(connection)
                connection.account_ended(reason)
                count += 1
        return count

    async def _sweep_forever(self) -> None:
        rejoin_at = time.monotonic() + REJOIN_SECONDS
        while True:
            await asyncio.sleep(self.every)
            try:
                await self.check()
            except (OperationalError, InterfaceError):
                pass  # the database is away: nothing can be told now; the next sweep tries again
            except Exception:
                logger.exception("checking the accounts of open connections failed")
            if self._channel and time.monotonic() >= rejoin_at:
                rejoin_at = time.monotonic() + REJOIN_SECONDS
                try:
                    await self._layer.group_add(ACCOUNTS_GROUP, self._channel)
                except Exception:
                    logger.warning(
                        "joining %s again failed; retrying in an hour", ACCOUNTS_GROUP, exc_info=True
                    )

    async def _listen(self) -> None:
        failing = False
        while True:
            try:
                message = await self._layer.receive(self._channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                if not failing:  # once per outage, not every half second
                    logger.warning("receiving account events failed; retrying", exc_info=True)
                failing = True
                await asyncio.sleep(0.5)
                continue
            failing = False
            try:
                self.ended(
                    message["user_id"],
                    message["reason"],
                    key_hash=message.get("key_hash"),
                    session=message.get("session"),
                )
            except (KeyError, TypeError):
                logger.warning("ignored a malformed %s message: %r", ACCOUNT_ENDED, message)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
