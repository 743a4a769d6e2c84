"""Shared fixtures: personas (alice, bob, charlie), API keys, fresh live sessions (chat/live/) per test."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import factories


def pytest_configure(config: pytest.Config) -> None:
    """One fast password hasher for the whole suite: every persona is created with a password, and the
    production hasher (PBKDF2, 1.5 M iterations) costs ~0.3 s per user. Servers the e2e tests start keep
    the production one."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def pytest_sessionstart(session: pytest.Session) -> None:
    """A root test run's sandboxes run as another user (agents/sandbox/site.py), who must pass through the
    checkout to the test data dir (var/test) and the runner interpreter (var/runner-python). A fresh
    clone may sit in a 0700 folder (`mktemp -d`): let others pass through it (never list or read it)."""
    from django.conf import settings

    if os.geteuid() != 0 or settings.AGENTSITE_SANDBOX_UID == 0:
        return
    root = Path(__file__).resolve().parents[1]
    data_dir = Path(settings.DATA_DIR)
    folders = {root, root / "var"}
    if data_dir.is_relative_to(root):
        folders |= {data_dir, *(parent for parent in data_dir.parents if parent.is_relative_to(root))}
    for folder in sorted(folders):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(folder.stat().st_mode | 0o001)


def services_required() -> bool:
    return os.environ.get("AGENTSITE_REQUIRE_SERVICES", "").lower() in {"1", "true", "yes", "on"}


@pytest.fixture
def alice(db: Any) -> Any:
    return factories.user("alice")


@pytest.fixture
def bob(db: Any) -> Any:
    return factories.user("bob")


@pytest.fixture
def staff(db: Any) -> Any:
    return factories.user("charlie", is_staff=True)


@pytest.fixture
def alice_key(alice: Any) -> str:
    return factories.api_key(alice)


@pytest.fixture
def bob_key(bob: Any) -> str:
    return factories.api_key(bob)


@pytest.fixture
def staff_key(staff: Any) -> str:
    return factories.api_key(staff)


@pytest.fixture
def api(client: Any) -> Iterator[Any]:
    """Django's test client speaking JSON with a bearer key: api(key).post(path, body)."""

    def make(key: str | None) -> factories.JsonClient:
        return factories.JsonClient(client, key)

    yield make


@pytest.fixture(autouse=True)
async def fresh_live_sessions() -> AsyncIterator[None]:
    """Each test gets its own live sessions (controllers are bound to the test's event loop)."""
    from chat.live import reset_live_sessions
    from chat.runtime import setup_cache

    setup_cache.reset()  # rows of the previous test are gone (flushed without signals)
    await reset_live_sessions()
    yield
    await reset_live_sessions()


pytest_plugins = ["tests.support.fake_llm_fixtures"]


@pytest.fixture
def llm(fake_llm: Any, db: Any) -> Any:
    """Make the fake LLM the site's default model, so real turns talk to it over HTTP."""
    from agents.models import Provider, SiteDefault

    provider = Provider.objects.create(
        id="fake",
        name="Fake LLM",
        base_url=fake_llm.base_url,
        api_key="sk-fake",
        model_list=["fake-model"],
        default_model="fake-model",
    )
    site = SiteDefault.load()
    site.provider = provider
    site.model = "fake-model"
    site.save()
    return fake_llm


@pytest.fixture
async def redis_client() -> AsyncIterator[Any]:
    """A real Redis connection (REDIS_URL or the local default); skipped, or failed in CI, when absent."""
    import redis.asyncio as aioredis

    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    client = aioredis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        await client.ping()
    except Exception as exc:
        await client.aclose()
        message = f"Redis at {url} does not answer: {exc}"
        if services_required():
            pytest.fail(message)
        pytest.skip(message)
    yield client
    await client.aclose()


@pytest.fixture(scope="session", autouse=True)
def drop_stale_postgres_test_databases() -> Iterator[None]:
    """Postgres runs use one test database per run (settings: test_agentsite_<pid>). Drop this run's at
    the end even when a worker thread still holds a connection (WITH FORCE), and those of dead runs."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        yield
        return
    import psycopg

    admin = url.replace("postgres://", "postgresql://", 1)

    def drop(only_dead: bool) -> None:
        try:
            with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
                names = [
                    r[0]
                    for r in conn.execute(
                        "SELECT datname FROM pg_database WHERE datname LIKE 'test_agentsite_%'"
                    )
                ]
                for name in names:
                    pid = name.rsplit("_", 1)[-1]
                    alive = pid.isdigit() and os.path.exists(f"/proc/{pid}")
                    if (only_dead and not alive) or (not only_dead and pid == str(os.getpid())):
                        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except Exception as exc:  # hygiene only: never fail a run for it
            print(f"could not drop stale test databases: {exc}")

    drop(only_dead=True)
    yield
    drop(only_dead=False)
