"""A reload shows the chat exactly as it was live: after a steer, a cancel (mid-answer and before any
output), an approval, a tool error with thinking, and a delegation to an external agent (the mock ACP
runner), the transcript's shape after a reload equals the one on screen before it."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.acp.support import runner_body
from tests.browser.conftest import screenshot
from tests.browser.quality import reload_settled, settled, transcript_shape, watch
from tests.browser.test_chat_browser import WORDS, new_chat, send, slow
from tests.browser.test_quality_browser import call_api


def same_after_reload(page: Any, step: str) -> Any:
    settled(page)
    live = transcript_shape(page)
    reload_settled(page)
    assert transcript_shape(page) == live, f"the transcript after a reload differs from live after {step}"
    return live


def order_of(page: Any, *texts: str) -> list[int]:
    content = page.locator("#transcript").inner_text()
    return [content.index(text) for text in texts]


def test_reload_equals_live_after_steer_cancel_approval_tool_error_and_delegation(
    page: Any, fake_model: Any
) -> None:
    watch(page)
    transcript = page.locator("#transcript")

    # A steer: the first step's answer, the steered message, the answer that read it.
    fake_model.script(slow(WORDS, 0.08), {"text": "Noted the steer."})
    new_chat(page)
    send(page, "first task")
    expect(transcript.locator(".text.streaming")).to_contain_text("w3")
    send(page, "steer me")
    page.locator("#pending li").get_by_role("button", name="Steer").click()
    expect(transcript.locator(".markdown").last).to_have_text("Noted the steer.", timeout=15_000)
    same_after_reload(page, "a steer")
    expect(transcript.locator("li.user", has_text="steer me")).to_contain_text("steered")
    a, b, c = order_of(page, "w40", "steer me", "Noted the steer.")
    assert a < b < c

    # A cancel mid-answer keeps what was streamed, marked; one before any output leaves a stub in place.
    fake_model.script(slow(WORDS, 0.1))
    send(page, "long job")
    expect(transcript.locator(".text.streaming")).to_contain_text("w3")
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#paused")).to_be_visible()
    same_after_reload(page, "a cancel mid-answer")
    cancelled = transcript.locator("li.assistant[data-status='cancelled']")
    expect(cancelled).to_have_count(1)
    expect(cancelled).to_contain_text("w2")
    fake_model.script({"text": "too late", "delay": 5})
    send(page, "cancel me early")
    expect(page.locator("#run-state")).to_have_text("Agent is working…")
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#paused")).to_be_visible()
    expect(page.locator("#run-state")).to_have_text("")  # "paused" is said once, by the note
    expect(page.locator("#queue-title")).to_be_hidden()  # no empty "Waiting to be sent" heading
    same_after_reload(page, "a cancel before any output")
    stub = page.locator(
        "#u-" + page.locator("#transcript li.user").last.get_attribute("data-message-id") + " + li"
    )
    expect(stub).to_have_attribute("data-status", "cancelled")  # right after its message, not at the end

    # An approval, then thinking and a tool error.
    fake_model.script(
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "hello"}}]},
        {
            "reasoning": "Let me read a file that is not there.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "missing.txt"}}],
        },
        {"text": "That file is missing."},
    )
    send(page, "write and read")
    page.get_by_role("dialog").get_by_role("button", name="Approve").click()
    expect(transcript.locator(".markdown").last).to_have_text("That file is missing.")
    same_after_reload(page, "an approval and a tool error")
    expect(transcript.locator("details.tool.error .tool-status")).to_have_text("error")
    expect(transcript.locator("details.thinking").last).to_contain_text("Let me read a file")

    # A delegation: the external agent's progress (not stored) comes back from the event replay.
    call_api(page, "PUT", "/api/v1/agents/default/config/acp/mock_runner", runner_body(marker="browser"))
    call_api(page, "PUT", "/api/v1/agents/default/tools/delegate_external_agent", {"enabled": True})
    try:
        page.get_by_label("Approvals").select_option("full_access")
        fake_model.script(
            {
                "tool_calls": [
                    {
                        "name": "delegate_external_agent",
                        "arguments": {"action": "start", "runner": "mock_runner", "message": "hello"},
                    }
                ]
            },
            {"text": "The runner answered."},
        )
        send(page, "ask the runner")
        expect(transcript.locator(".markdown").last).to_have_text("The runner answered.", timeout=30_000)
        live = same_after_reload(page, "a delegation")
        assert "External agent progress" in str(live) or transcript.locator("ol.delegate li").count() > 0
        expect(transcript.locator("ol.delegate")).to_contain_text("mock reply: hello")
        expect(page.get_by_label("Approvals")).to_have_value("full_access")  # remembered by the server
        page.locator("#transcript details.tool").last.scroll_into_view_if_needed()
        screenshot(page, "chat-delegation")
    finally:
        call_api(page, "PUT", "/api/v1/agents/default/tools/delegate_external_agent", {"enabled": False})
        call_api(page, "DELETE", "/api/v1/agents/default/config/acp/mock_runner")
    assert page.quality_problems == []  # type: ignore[attr-defined]
    assert re.search(r"/chat/[^/]+$", page.url)


def test_a_failed_turn_says_why_also_after_a_reload(page: Any, fake_model: Any) -> None:
    """The reason a turn failed is stored with its message: a reload says it too, not only 'failed'."""
    watch(page)
    fake_model.script({"text": "alpha beta gamma", "break_after": 1})
    new_chat(page)
    send(page, "break please")
    failure = page.locator("#transcript .failure")
    expect(failure).to_contain_text("The model could not answer: ")
    said = failure.inner_text()
    assert said.rstrip(".") != "The model could not answer"
    reload_settled(page)
    expect(page.locator("#transcript .failure")).to_have_text(said)
    assert page.quality_problems == []  # type: ignore[attr-defined]
