"""Every page at 1280 and 390 px, light and dark: no horizontal overflow, no console or page error, no serious
or critical axe-core violation. Screenshots of each land in the test output folder (conftest.SCREENSHOTS)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.browser.quality import assert_clean, settled, watch

DESKTOP, PHONE = {"width": 1280, "height": 860}, {"width": 390, "height": 844}
ANSWER = (
    "Here is **a table**, some code and a long line.\n\n"
    "| tool | risk | what it does |\n|---|---|---|\n| shell | dangerous | runs a command in the sandbox |\n"
    "| read_file | safe | reads a file |\n\n"
    "```python\ndef greet(name: str) -> str:\n"
    "    return f'hello {name}'  # a comment long enough to need a scroll bar on a phone\n"
    "```\n\n" + "A long paragraph. " * 30
)


def csrf(page: Any) -> str:
    return str(page.locator('meta[name="csrf-token"]').get_attribute("content"))


def call_api(page: Any, method: str, path: str, body: Any = None) -> Any:
    response = page.request.fetch(
        path,
        method=method,
        data=body,
        headers={"X-CSRFToken": csrf(page), "Content-Type": "application/json"},
    )
    assert response.ok, response.text()
    return response.json() if response.status != 204 else None


def open_context(
    browser: Any, portal_server: Any, admin_state: Any, viewport: dict[str, int], theme: str
) -> Any:
    ctx = browser.new_context(
        base_url=portal_server.base_url,
        viewport=viewport,
        storage_state=admin_state,
        color_scheme=theme,
        is_mobile=viewport is PHONE,
        has_touch=viewport is PHONE,
    )
    ctx.set_default_timeout(10_000)
    return ctx


@pytest.fixture(scope="module")
def seeded(browser: Any, portal_server: Any, admin_state: Any, fake_model: Any) -> Iterator[dict[str, str]]:
    """A chat with a Markdown answer, an approved write_file and a workspace file; a job; an inbox item."""
    ctx = open_context(browser, portal_server, admin_state, DESKTOP, "light")
    page = ctx.new_page()
    fake_model.script(
        {"text": ANSWER},
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "notes/plan.md", "content": "# Plan\n\n- one\n"}}
            ]
        },
        {"text": "Saved the plan."},
    )
    page.goto("/chat/new")
    box = page.get_by_label("Message to the agent")
    box.fill("Show me what you can do")
    box.press("Enter")
    page.wait_for_url(re.compile(r"/chat/(?!new$)[^/]+$"))
    expect(page.locator("#transcript .markdown table")).to_have_count(1)
    box.fill("Write a plan")
    box.press("Enter")
    page.get_by_role("dialog").get_by_role("button", name="Approve").click()
    expect(page.locator("#transcript .markdown").last).to_have_text("Saved the plan.")
    settled(page)
    chat = page.url.removeprefix(portal_server.base_url)
    job = call_api(
        page,
        "POST",
        "/api/v1/cron/jobs",
        {
            "name": "Daily text",
            "schedule": {"type": "cron", "cron": "0 8 * * *"},
            "task_type": "text",
            "text": "Good morning",
            "dispatch": {
                "type": "channel",
                "channel": "console",
                "target": {"session_id": "job-quality"},
                "mode": "final",
            },
        },
    )
    ctx.close()
    yield {"chat": chat, "job": "/jobs/" + job["id"]}


PAGES = [
    "/",
    "chat",
    "/chat/new",
    "/settings/keys",
    "/jobs",
    "job",
    "/inbox",
    "/usage",
    "/settings/agents",
    "/settings/agents/default",
    "/settings/providers",
    "/account/password/",
    "/no-such-page",
]


@pytest.mark.parametrize(
    ("viewport", "theme", "pages"),
    [
        (DESKTOP, "light", PAGES),
        (PHONE, "light", PAGES),
        (DESKTOP, "dark", ["chat", "/jobs", "/usage", "/settings/providers"]),
        (PHONE, "dark", ["/", "chat", "/settings/keys"]),
    ],
    ids=["desktop-light", "phone-light", "desktop-dark", "phone-dark"],
)
def test_every_page_passes_the_quality_gates(
    browser: Any,
    portal_server: Any,
    admin_state: Any,
    seeded: dict[str, str],
    viewport: Any,
    theme: str,
    pages: Any,
) -> None:
    ctx = open_context(browser, portal_server, admin_state, viewport, theme)
    page = ctx.new_page()
    watch(page)
    width = "desktop" if viewport is DESKTOP else "phone"
    for path in pages:
        page.goto(seeded.get(path, path))
        if path == "chat":
            settled(page)
        assert_clean(page, f"{path} at {width} ({theme})", status=404 if path == "/no-such-page" else 200)
        name = (path.strip("/").replace("/", "-") or "home") + f"-{width}-{theme}"
        screenshot(page, name)
    ctx.close()


def test_logged_out_pages_pass_the_quality_gates(browser: Any, portal_server: Any) -> None:
    for viewport in (DESKTOP, PHONE):
        ctx = browser.new_context(base_url=portal_server.base_url, viewport=viewport)
        page = ctx.new_page()
        watch(page)
        page.goto("/login/")
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill("wrong password")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("alert")).to_contain_text("didn't match")
        expect(page.get_by_label("Username")).to_have_value("admin")  # kept after a failed login
        assert_clean(page, f"login at {viewport['width']}")
        screenshot(page, f"login-{viewport['width']}")
        page.goto("/setup/")
        assert page.url.endswith("/login/")  # setup is done: a redirect, not a 404
        ctx.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_approval_dialog_and_the_files_panel_pass_the_gates(
    browser: Any, portal_server: Any, admin_state: Any, fake_model: Any, seeded: dict[str, str], viewport: Any
) -> None:
    ctx = open_context(
        browser, portal_server, admin_state, viewport, "dark" if viewport is PHONE else "light"
    )
    page = ctx.new_page()
    watch(page)
    width = "desktop" if viewport is DESKTOP else "phone"
    page.goto(seeded["chat"])
    settled(page)
    page.get_by_role("button", name="Files").click()
    panel = page.get_by_role("complementary", name="Workspace")
    panel.get_by_role("button", name="▸ notes/", exact=True).click()
    panel.get_by_role("button", name="plan.md", exact=True).click()
    expect(panel.locator(".file-preview h1")).to_have_text("Plan")
    assert_clean(page, f"files panel at {width}")
    screenshot(page, f"files-{width}")
    panel.get_by_role("button", name="Close").click()

    fake_model.script(
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "notes/plan.md", "content": "# Plan\n\n- two\n"}}
            ]
        },
        {"text": "Left it alone."},
    )
    page.get_by_label("Message to the agent").fill("Change the plan")
    page.get_by_label("Message to the agent").press("Enter")
    dialog = page.get_by_role("dialog")
    expect(dialog.locator("pre.diff .del")).to_have_text("-- one")
    assert_clean(page, f"approval dialog at {width}")
    screenshot(page, f"approval-{width}")
    page.keyboard.press("Escape")  # Esc refuses
    expect(dialog).to_be_hidden()
    expect(page.locator("#transcript .markdown").last).to_have_text("Left it alone.")
    ctx.close()
