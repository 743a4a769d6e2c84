"""Per-user limits as a person meets them in the portal (docs/protocol.md §6.6): a message refused because
the chat's queue is full is said so, and its text is back in the composer; a tab past the user's open
sockets says why it is not connected and does not hammer the server with reconnects (close 4429)."""

from __future__ import annotations

import re
import time
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import ADMIN, screenshot
from tests.browser.test_chat_browser import new_chat, send
from tests.support.server import serve, server_env


def test_a_full_queue_and_too_many_sockets_are_said_and_nothing_reconnects_in_a_loop(
    browser: Any, fake_model: Any, tmp_path: Any
) -> None:
    limits = {"AGENTSITE_USER_MAX_SOCKETS": "1", "AGENTSITE_SESSION_MAX_PENDING": "1"}
    model = {
        "OPENAI_BASE_URL": fake_model.base_url,
        "OPENAI_API_KEY": "sk-fake",
        "AGENTSITE_DEFAULT_MODEL": "m",
    }
    with server_env(tmp_path, **limits, **model) as env, serve(env) as server:
        ctx = browser.new_context(base_url=server.base_url)
        ctx.set_default_timeout(10_000)
        page = ctx.new_page()
        page.goto("/setup/")
        page.get_by_label("Username").fill(ADMIN["username"])
        page.get_by_label("Password", exact=True).fill(ADMIN["password"])
        page.get_by_label("Password (again)").fill(ADMIN["password"])
        page.get_by_role("button", name="Create the admin account").click()
        page.wait_for_url(server.base_url + "/")

        fake_model.script({"text": "a long answer", "delay": 30})
        new_chat(page)
        send(page, "first, running")
        expect(page.locator("#run-state")).to_have_text("Agent is working…")
        send(page, "second, waiting")
        expect(page.locator("#pending li")).to_have_count(1)
        send(page, "third, one too many")
        notice = page.locator("#notices .notice").last
        expect(notice).to_contain_text("AGENTSITE_SESSION_MAX_PENDING")
        expect(page.get_by_label("Message to the agent")).to_have_value("third, one too many")
        expect(page.locator("#pending li")).to_have_count(1)  # nothing was queued
        screenshot(page, "limits-queue-full")

        second = ctx.new_page()
        sockets: list[float] = []
        second.on("websocket", lambda ws: sockets.append(time.monotonic()))
        second.goto(page.url)
        expect(second.locator("#conn")).to_have_text("too many connections")
        expect(second.locator("#notices .notice").last).to_contain_text("AGENTSITE_USER_MAX_SOCKETS")
        second.wait_for_timeout(3_000)
        assert len(sockets) == 1, f"{len(sockets)} sockets in 3 s: reconnecting in a loop"
        screenshot(second, "limits-too-many-sockets")
        expect(page.locator("#conn")).to_have_text(re.compile("connected"))  # the first tab is unharmed
        ctx.close()
