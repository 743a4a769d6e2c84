"""Issue 17's "done when", in a real browser: staff add an MCP server on the agent's settings page, "Test"
lists its tools, and a chat's agent calls one of them after the user approved it. The server is the real
test server (tests/support/mcp_test_server.py) on stdio, in the portal server's sandbox."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.browser.test_chat_browser import assistant, new_chat, send
from tests.support.runner_kit import mcp_server_folder, mcp_server_script, runner_python


def test_staff_add_an_mcp_server_test_it_and_a_chat_calls_its_tool_after_approval(
    page: Any, fake_model: Any
) -> None:
    page.goto("/settings/agents/default")
    form = page.locator("form[data-named-new][data-transport-form]")
    form.get_by_label("Server name").fill("testsrv")
    form.get_by_label("Command").fill(runner_python())
    form.get_by_label("Arguments (one a line)").fill(str(mcp_server_script()))
    form.get_by_label("More read-only paths the program needs in the sandbox (one a line)").fill(
        str(mcp_server_folder())
    )
    expect(form.get_by_label("URL")).to_be_hidden()  # the fields of the other transport are out of the way
    form.get_by_label("Enabled (its tools are offered to the agent)").check()
    form.get_by_role("button", name="Add server").click()

    server = page.locator("details#mcp-testsrv")
    expect(server).to_contain_text("not checked yet")
    server.locator("summary").click()
    server.get_by_role("button", name="Test: list its tools").click()
    expect(server.locator(".test-result")).to_contain_text(re.compile(r"tools: .*echo"), timeout=60_000)
    screenshot(page, "mcp-server")
    page.reload()
    expect(page.locator("details#mcp-testsrv summary .badge")).to_have_text("ok")
    expect(page.get_by_label("mcp__testsrv__echo", exact=True)).to_be_checked()  # in the tool switches

    fake_model.script(
        {"tool_calls": [{"name": "mcp__testsrv__echo", "arguments": {"text": "hello from MCP"}}]},
        {"text": "The server said hello."},
    )
    new_chat(page)
    send(page, "ask the MCP server")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible(timeout=60_000)
    expect(dialog).to_contain_text("mcp__testsrv__echo")
    expect(dialog).to_contain_text("hello from MCP")
    dialog.get_by_role("button", name="Approve").click()
    expect(dialog).to_be_hidden()
    tool = assistant(page).locator("details.tool").first
    expect(tool.locator(".tool-status")).to_have_text("done", timeout=60_000)
    expect(assistant(page).last.locator(".markdown")).to_have_text("The server said hello.")
    assert page.js_errors == []  # type: ignore[attr-defined]
