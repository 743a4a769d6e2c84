"""Open connections follow their account (accounts/credentials.py, docs/protocol.md §6.2): the rule that
says which credentials ended, the events that say so at once, and the sweep that finds the rest.

The sockets themselves are in tests/chat/test_consumer.py; real server processes in
tests/e2e/test_account_sockets.py."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.sessions.models import Session
from django.db import transaction
from django.test import Client
from django.utils import timezone

from accounts.credentials import (
    KEY_ENDED,
    PASSWORD_CHANGED,
    SESSION_ENDED,
    USER_ENDED,
    AccountWatch,
    Credential,
    credentials_ended,
)
from accounts.models import ApiKey
from accounts.services import api_key_create, api_key_revoke
from tests import factories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]


class FakeConnection:
    def __init__(self) -> None:
        self.reason: str | None = None
        self.told = asyncio.Event()

    def account_ended(self, reason: str) -> None:
        assert self.reason is None, "told twice"
        self.reason = reason
        self.told.set()


def logged_in(user: Any) -> tuple[Client, str]:
    client = Client()
    client.force_login(user)
    return client, client.session.session_key or ""


def session_credential(user: Any) -> Credential:
    """A browser session's credential as a socket opened with its cookie holds it (with its password hash)."""
    client = Client()
    client.force_login(user)
    return Credential.of_session(user.pk, client.session)


def key_credential(user: Any, **fields: Any) -> tuple[ApiKey, Credential]:
    key, secret = api_key_create(user=user)
    if fields:
        ApiKey.objects.filter(pk=key.pk).update(**fields)
    return key, Credential.of_key(user.pk, secret)


# --- the rule ---------------------------------------------------------------------------------------


def test_each_way_a_credential_ends_is_named(django_assert_num_queries: Any) -> None:
    alice, bob = factories.user("alice"), factories.user("bob")
    now = timezone.now()
    _, good = key_credential(alice)
    _, revoked = key_credential(alice, revoked_at=now)
    _, expired = key_credential(alice, expires_at=now - dt.timedelta(seconds=1))
    _, later = key_credential(alice, expires_at=now + dt.timedelta(hours=1))
    deleted_key, deleted = key_credential(alice)
    deleted_key.delete()
    _, session = logged_in(alice)
    logged_out_client, logged_out = logged_in(alice)
    logged_out_client.logout()
    _, stale = logged_in(alice)
    Session.objects.filter(session_key=stale).update(expire_date=now - dt.timedelta(seconds=1))
    _, bobs_key = key_credential(bob)
    _, bobs_session = logged_in(bob)
    bob.is_active = False
    bob.save()
    carol = factories.user("carol")
    carols_login, carols_key = session_credential(carol), key_credential(carol)[1]
    carol.set_password("another password")
    carol.save()
    alices_login = session_credential(alice)
    gone = Credential(987654, key_hash="0" * 64)
    credentials = [
        good,
        revoked,
        expired,
        later,
        deleted,
        Credential(alice.pk, session_key=session),
        Credential(alice.pk, session_key=logged_out),
        Credential(alice.pk, session_key=stale),
        Credential(alice.pk),
        bobs_key,
        Credential(bob.pk, session_key=bobs_session),
        gone,
        carols_login,
        carols_key,
        alices_login,
    ]

    assert carols_login.session_hash and alices_login.session_hash
    with django_assert_num_queries(3):  # users, keys, sessions: however many credentials
        ended = credentials_ended(credentials, now=now)

    assert ended == {
        revoked: KEY_ENDED["revoked"],
        expired: KEY_ENDED["expired"],
        deleted: KEY_ENDED[None],
        Credential(alice.pk, session_key=logged_out): SESSION_ENDED,
        Credential(alice.pk, session_key=stale): SESSION_ENDED,
        bobs_key: USER_ENDED,
        Credential(bob.pk, session_key=bobs_session): USER_ENDED,
        gone: USER_ENDED,
        carols_login: PASSWORD_CHANGED,  # her key stays: keys do not follow the password
    }
    assert all("api_key" in reason for reason in ended.values())  # the contract's words for 4401


def test_nothing_to_check_asks_nothing(django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        assert credentials_ended([], now=timezone.now()) == {}


# --- the watch: events ------------------------------------------------------------------------------


@pytest.fixture
async def watch() -> Any:
    """A watch whose sweep never runs: whatever it ends, an event ended."""
    watch = AccountWatch(every=3600)
    await watch.start()
    yield watch
    await watch.stop()


async def told(connection: FakeConnection, within: float = 1.0) -> str | None:
    try:
        await asyncio.wait_for(connection.told.wait(), within)
    except TimeoutError:
        return None
    return connection.reason


async def test_revoking_a_key_ends_only_that_keys_connections_at_once(watch: Any) -> None:
    alice = await sync_to_async(factories.user)("alice")
    (key, first), (_, second) = [await sync_to_async(key_credential)(alice) for _ in range(2)]
    on_first, also_first, on_second = FakeConnection(), FakeConnection(), FakeConnection()
    watch.add(on_first, first)
    watch.add(also_first, first)
    watch.add(on_second, second)

    await sync_to_async(api_key_revoke)(key=key)

    assert await told(on_first) == await told(also_first) == KEY_ENDED["revoked"]
    assert await told(on_second, within=0.3) is None
    assert len(watch) == 1


async def test_deactivating_or_deleting_a_user_ends_all_their_connections_and_nobody_elses(
    watch: Any,
) -> None:
    alice, bob, carol = [await sync_to_async(factories.user)(name) for name in ("alice", "bob", "carol")]
    _, alices_key = await sync_to_async(key_credential)(alice)
    _, alices_session = await sync_to_async(logged_in)(alice)
    _, bobs_key = await sync_to_async(key_credential)(bob)
    _, carols_key = await sync_to_async(key_credential)(carol)
    by_key, by_cookie, bobs, carols = (FakeConnection() for _ in range(4))
    watch.add(by_key, alices_key)
    watch.add(by_cookie, Credential(alice.pk, session_key=alices_session))
    watch.add(bobs, bobs_key)
    watch.add(carols, carols_key)

    alice.is_active = False
    await sync_to_async(alice.save)()
    await sync_to_async(bob.delete)()

    assert await told(by_key) == await told(by_cookie) == await told(bobs) == USER_ENDED
    assert await told(carols, within=0.3) is None


async def test_logging_out_ends_the_connections_of_that_browser_session_only(watch: Any) -> None:
    alice = await sync_to_async(factories.user)("alice")
    leaving, leaving_session = await sync_to_async(logged_in)(alice)
    _, staying_session = await sync_to_async(logged_in)(alice)
    _, key = await sync_to_async(key_credential)(alice)
    on_leaving, on_staying, on_key = FakeConnection(), FakeConnection(), FakeConnection()
    watch.add(on_leaving, Credential(alice.pk, session_key=leaving_session))
    watch.add(on_staying, Credential(alice.pk, session_key=staying_session))
    watch.add(on_key, key)

    await sync_to_async(leaving.logout)()

    assert await told(on_leaving) == SESSION_ENDED
    assert await told(on_staying, within=0.3) is None and on_key.reason is None


async def test_a_change_that_is_rolled_back_ends_nothing(watch: Any) -> None:
    alice = await sync_to_async(factories.user)("alice")
    key, credential = await sync_to_async(key_credential)(alice)
    connection = FakeConnection()
    watch.add(connection, credential)

    def revoke_then_roll_back() -> None:
        with transaction.atomic():
            api_key_revoke(key=key)
            transaction.set_rollback(True)

    await sync_to_async(revoke_then_roll_back)()

    assert await told(connection, within=0.5) is None


async def test_a_discarded_connection_is_not_told(watch: Any) -> None:
    alice = await sync_to_async(factories.user)("alice")
    key, credential = await sync_to_async(key_credential)(alice)
    connection = FakeConnection()
    watch.add(connection, credential)
    watch.discard(connection)

    await sync_to_async(api_key_revoke)(key=key)

    assert await told(connection, within=0.3) is None and len(watch) == 0


# --- the watch: the sweep -----------------------------------------------------------------------------


async def test_the_sweep_finds_what_no_event_said_within_a_second() -> None:
    alice = await sync_to_async(factories.user)("alice")
    key, credential = await sync_to_async(key_credential)(alice)
    watch = AccountWatch(every=0.2)
    connection = FakeConnection()
    await watch.start()
    try:
        watch.add(connection, credential)
        await asyncio.sleep(0.5)
        assert connection.reason is None  # a valid key is left alone
        soon = timezone.now() + dt.timedelta(seconds=0.3)
        await sync_to_async(ApiKey.objects.filter(pk=key.pk).update)(expires_at=soon)  # no signal
        assert await told(connection, within=1.5) == KEY_ENDED["expired"]
    finally:
        await watch.stop()
