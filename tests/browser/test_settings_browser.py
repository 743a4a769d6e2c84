"""Settings, jobs and inbox pages in a real browser; screenshots at desktop and phone width."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.browser.test_quality_browser import call_api


def test_api_key_is_shown_once_then_revoked(page: Any) -> None:
    page.goto("/settings/keys")
    page.get_by_label("Name").fill("browser script")
    page.get_by_role("button", name="Create key").click()

    key = page.get_by_label("New API key")
    expect(key).to_have_value(re.compile(r"^ask_[A-Za-z0-9_-]{40}$"))
    secret = key.input_value()
    row = page.locator("#keys tbody tr", has_text="browser script")
    expect(row).to_have_count(1)
    screenshot(page, "keys")

    page.reload()
    assert secret not in page.content()  # shown once
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#keys tbody tr", has_text="browser script").get_by_role(
        "button", name=re.compile("Revoke")
    ).click()
    expect(page.locator("#keys tbody tr", has_text="browser script")).to_have_count(0)
    page.reload()
    expect(page.locator("#keys tbody tr", has_text="browser script")).to_have_count(0)


def test_a_key_made_in_the_portal_may_expire(page: Any) -> None:
    page.goto("/settings/keys")
    page.get_by_label("Name").fill("for a month")
    page.get_by_label("Expires").select_option(label="in 30 days")
    page.get_by_role("button", name="Create key").click()

    expect(page.get_by_label("New API key")).to_have_value(re.compile(r"^ask_"))
    in_a_month = (dt.datetime.now(dt.UTC) + dt.timedelta(days=30)).strftime("%Y-%m-%d")
    row = page.locator("#keys tbody tr", has_text="for a month")
    expect(row).to_contain_text(in_a_month)
    expect(page.get_by_label("Expires")).to_have_value("")  # the next key never expires unless told
    page.reload()
    expect(row).to_contain_text(in_a_month)


def test_provider_connection_test_and_a_tool_switch(page: Any) -> None:
    page.goto("/settings/providers")
    page.get_by_role("button", name="Test connection").first.click()
    expect(page.locator(".test-result").first).to_contain_text("Connected. Models: fake-model")
    screenshot(page, "providers")

    page.goto("/settings/agents/default")
    shell = page.get_by_label("shell", exact=True)
    expect(shell).to_be_checked()
    shell.uncheck()
    expect(shell).to_be_enabled()
    page.reload()
    expect(page.get_by_label("shell", exact=True)).not_to_be_checked()
    page.get_by_label("shell", exact=True).check()
    expect(page.get_by_label("shell", exact=True)).to_be_enabled()
    page.reload()
    expect(page.get_by_label("shell", exact=True)).to_be_checked()
    screenshot(page, "agent")


def test_the_models_a_connection_test_found_are_offered_in_the_model_fields(page: Any) -> None:
    page.goto("/settings/providers")
    offered = page.locator('#all-models option[value="fake-model-large"]')
    page.get_by_role("button", name="Test connection").first.click()
    expect(page.locator(".test-result").first).to_contain_text("offered in the model fields")
    expect(offered).to_have_count(1)

    page.reload()  # kept on the provider, not only in this page
    expect(offered).to_have_count(1)
    expect(page.locator('#p1-found option[value="fake-model-large"]')).to_have_count(1)
    page.goto("/settings/agents/default")
    expect(page.locator('#model-list option[value="fake-model-large"]')).to_have_count(1)


def test_an_acp_runner_is_tested_from_its_form(page: Any) -> None:
    from tests.acp.support import runner_body

    page.goto("/settings/agents/default")
    call_api(page, "PUT", "/api/v1/agents/default/config/acp/probe_me", runner_body(marker=uuid.uuid4().hex))
    page.reload()
    runner = page.locator("details.runner", has_text="probe_me")
    runner.locator("summary").click()
    runner.get_by_role("button", name="Test: start and shake hands").click()

    expect(runner.locator(".test-result")).to_contain_text(
        "Mock ACP runner 1.0.0 answered (ACP protocol 1), can resume sessions. It was stopped again.",
        timeout=30_000,
    )
    call_api(page, "DELETE", "/api/v1/agents/default/config/acp/probe_me")


def test_cron_job_form_explains_the_schedule_runs_and_fills_the_inbox(page: Any) -> None:
    page.goto("/jobs")
    page.get_by_label("Name").fill("Morning summary")
    page.get_by_label("Cron expression (minute hour day month weekday)").fill("30 7 * * 1-5")
    words = page.locator("#schedule-words")
    expect(words).to_contain_text("07:30")
    expect(words.locator("li")).to_have_count(5)
    page.get_by_label("Cron expression (minute hour day month weekday)").fill("61 * * * *")
    expect(words).to_have_class(re.compile("error"))
    page.get_by_label("Cron expression (minute hour day month weekday)").fill("30 7 * * 1-5")
    page.get_by_label("Prompt or text").fill("daily summary please")
    page.get_by_role("button", name="Create job").click()

    row = page.locator("#jobs tbody tr", has_text="Morning summary")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("07:30")
    screenshot(page, "jobs")
    row.get_by_role("button", name="Run Morning summary now").click()
    # The row follows the run without a reload: its last run, then how it ended.
    expect(row.locator("output")).to_have_text("Finished: success.", timeout=15_000)
    expect(row.locator('[data-cell="last-run"] .badge')).to_have_text("success")
    badge = page.locator("#inbox-badge")
    expect(badge).to_be_visible()  # the run's result reached the inbox, and the badge without a reload
    page.get_by_role("link", name="Morning summary").click()
    expect(page.locator(".facts")).not_to_contain_text("job-morning")  # the chat by its title, not its id
    page.go_back()

    expect(badge).to_be_visible()
    page.get_by_role("link", name=re.compile("^Inbox")).click()
    item = page.locator(".inbox-item", has_text="Morning summary").first
    expect(item).to_be_visible()
    screenshot(page, "inbox")
    page.get_by_role("button", name="Mark all read").click()
    expect(page.locator("#inbox-badge")).to_be_hidden()


def test_main_pages_at_phone_width(browser: Any, portal_server: Any, admin_state: Any) -> None:
    context = browser.new_context(
        base_url=portal_server.base_url,
        viewport={"width": 390, "height": 844},
        storage_state=admin_state,
        is_mobile=True,
        has_touch=True,
    )
    page = context.new_page()
    page.goto("/")
    screenshot(page, "home-phone")
    page.goto("/chat/new")
    page.get_by_label("Message to the agent").fill("hello from a phone")
    page.get_by_role("button", name="Send").click()
    page.wait_for_url(re.compile(r"/chat/(?!new$)"))
    expect(page.locator("#transcript .markdown")).to_have_text("You said: hello from a phone")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing sticks out sideways
    screenshot(page, "chat-phone")
    page.goto("/jobs")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "jobs-phone")
    context.close()
