"""Browser tests: Debian's Chromium driven by Playwright against a real `manage.py serve` and the fake LLM.

One server, one fake model and one browser for the whole suite (start-up is the slow part); each test gets
a fresh browser context, logged in as the admin that the first visit creates through /setup/.
Without /usr/bin/chromium the suite is skipped, unless AGENTSITE_REQUIRE_BROWSER=1 or
AGENTSITE_REQUIRE_SERVICES=1 (CI), where a missing browser is a failure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fake_llm_fixtures import fake_llm_subprocess
from tests.support.server import RunningServer, serve, server_env

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ADMIN = {"username": "admin", "password": "a-long-Pass-phrase-42"}
SCREENSHOTS = Path(os.environ.get("AGENTSITE_TEST_OUTPUT", ROOT / "var" / "test")) / "screenshots"


def _required() -> bool:
    flags = (os.environ.get(name, "") for name in ("AGENTSITE_REQUIRE_BROWSER", "AGENTSITE_REQUIRE_SERVICES"))
    return any(flag.lower() in {"1", "true", "yes", "on"} for flag in flags)


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    """Chromium from the system (never `playwright install`): skip without it, or fail when required."""
    reason = None
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "the playwright package is missing (pip install -e '.[test]')"
    if reason is not None:
        if _required():
            pytest.fail(f"browser tests are required but {reason}")
        pytest.skip(f"browser tests skipped: {reason}")
    return CHROMIUM


@dataclass
class FakeModel:
    base_url: str

    def script(self, *replies: dict[str, Any]) -> None:
        """Reset the fake model, then queue these replies (later requests echo the user)."""
        from agentsite.dev.fake_llm import script_remote

        httpx.post(self.base_url.removesuffix("/v1") + "/_reset", timeout=5)
        script_remote(self.base_url, *replies)


@pytest.fixture(scope="session")
def fake_model() -> Iterator[FakeModel]:
    with fake_llm_subprocess() as fake:
        yield FakeModel(base_url=fake.base_url)


@pytest.fixture(scope="session")
def portal_server(
    chromium_path: Path, fake_model: FakeModel, tmp_path_factory: Any
) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("browser")
    with serve_portal(folder, fake_model, AGENTSITE_CONFIRMATION_TIMEOUT="60") as server:
        yield server


@contextlib.contextmanager
def serve_portal(folder: Path, fake_model: FakeModel, **settings: str) -> Iterator[RunningServer]:
    """A portal server whose default model is the fake one, with these settings on top."""
    extra = {
        "OPENAI_BASE_URL": fake_model.base_url,
        "OPENAI_API_KEY": "sk-fake-browser",
        "AGENTSITE_DEFAULT_MODEL": "fake-model",
        **settings,
    }
    with server_env(folder, **extra) as env, serve(env) as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_live_sessions() -> None:
    """The server under test is another process: no in-process live sessions to reset (and no asyncio loop
    here, which Playwright's sync API would refuse)."""


@pytest.fixture(scope="package")
def browser(chromium_path: Path) -> Iterator[Any]:
    """One browser for this package, closed when its last test ends: Playwright's sync API keeps an event
    loop on this thread while it is open, which the rest of the suite (Django ORM, pytest-asyncio) must
    not see."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


def log_in(page: Any, base_url: str) -> None:
    """Log in as the admin; on a fresh server, create it through the first-run setup page."""
    page.goto(base_url + "/login/")
    if "/setup/" in page.url:
        page.get_by_label("Username").fill(ADMIN["username"])
        page.get_by_label("Password", exact=True).fill(ADMIN["password"])
        page.get_by_label("Password (again)").fill(ADMIN["password"])
        page.get_by_role("button", name="Create the admin account").click()
    else:
        page.get_by_label("Username").fill(ADMIN["username"])
        page.get_by_label("Password").fill(ADMIN["password"])
        page.get_by_role("button", name="Log in").click()
    page.wait_for_url(base_url + "/")


@pytest.fixture(scope="package")
def admin_state(browser: Any, portal_server: RunningServer) -> dict[str, Any]:
    """Log in once (password hashing is slow on purpose); contexts reuse the cookies."""
    ctx = browser.new_context(base_url=portal_server.base_url)
    page = ctx.new_page()
    log_in(page, portal_server.base_url)
    state: dict[str, Any] = ctx.storage_state()
    ctx.close()
    return state


@pytest.fixture
def context(browser: Any, portal_server: RunningServer, admin_state: dict[str, Any]) -> Iterator[Any]:
    ctx = browser.new_context(
        base_url=portal_server.base_url, viewport={"width": 1280, "height": 860}, storage_state=admin_state
    )
    ctx.set_default_timeout(10_000)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context: Any) -> Any:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors  # type: ignore[attr-defined]
    return page


def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path
