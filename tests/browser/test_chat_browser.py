"""The portal in a real browser: setup, streaming, Markdown safety, queue, approvals, reload mid-turn."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import log_in, screenshot

WORDS = " ".join(f"w{i}" for i in range(1, 41))


def slow(text: str, delay: float = 0.08) -> dict[str, Any]:
    return {
        "text": text,
        "chunk_delay": delay,
        "usage": {"prompt_tokens": 12, "completion_tokens": 34, "total_tokens": 46},
    }


def new_chat(page: Any) -> None:
    """A draft chat: nothing is stored until its first message (which `send` then waits for)."""
    page.goto("/")
    page.get_by_role("navigation", name="Your chats").get_by_role("link", name="New chat").click()
    page.wait_for_url(re.compile(r"/chat/new$"))
    expect(page.locator("#conn")).to_have_text("new chat")


def send(page: Any, text: str) -> None:
    draft = page.locator("#chat[data-session-id='']").count() > 0
    page.get_by_label("Message to the agent").fill(text)
    page.get_by_label("Message to the agent").press("Enter")
    if draft:
        page.wait_for_url(re.compile(r"/chat/(?!new$)[^/]+$"))
        expect(page.locator("#conn")).to_have_text("connected")


def assistant(page: Any) -> Any:
    return page.locator("#transcript li.assistant")


def test_first_visit_sets_up_the_admin_then_a_new_chat_streams_the_reply(
    browser: Any, portal_server: Any, fake_model: Any
) -> None:
    context = browser.new_context(base_url=portal_server.base_url, viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.goto("/")
    assert "/setup/" in page.url or "/login/" in page.url
    log_in(page, portal_server.base_url)
    fake_model.script(slow("Hello! This answer arrives word by word, streamed as it is written.", 0.12))

    new_chat(page)
    send(page, "Say hello")

    streaming = page.locator("#transcript .text.streaming")
    expect(streaming).to_contain_text("Hello!")  # partial text while the reply is still coming
    final = assistant(page).locator(".text.markdown")
    expect(final).to_have_text("Hello! This answer arrives word by word, streamed as it is written.")
    expect(assistant(page).locator(".meta")).to_contain_text("46 tokens")
    expect(page.locator("#transcript li.user .body")).to_have_text("Say hello")
    screenshot(page, "chat-desktop")
    context.close()


def test_markdown_renders_tables_and_code_and_model_html_never_runs(page: Any, fake_model: Any) -> None:
    text = (
        "| tool | risk |\n|---|---|\n| shell | dangerous |\n\n"
        "```python\ndef greet():\n    return 'hi'  # friendly\n```\n\n"
        "<script>window.__pwned = 1</script>\n\n"
        '[click me](javascript:window.__pwned=2) and <img src=x onerror="window.__pwned=3">'
    )
    fake_model.script({"text": text})
    new_chat(page)
    send(page, "Show me markdown")

    answer = assistant(page).locator(".markdown")
    expect(answer.locator("table th").first).to_have_text("tool")
    expect(answer.locator("td", has_text="dangerous")).to_be_visible()
    code = answer.locator("pre code.language-python")
    expect(code).to_contain_text("def greet")
    expect(code.locator(".tok-keyword", has_text="def")).to_have_count(1)
    expect(code.locator(".tok-comment")).to_have_text("# friendly")
    assert page.locator("#transcript script, #transcript img, #transcript [onerror]").count() == 0
    link = answer.get_by_text("click me")
    if link.count():
        assert not (link.get_attribute("href") or "").lower().startswith("javascript")
        link.click()
    assert page.evaluate("window.__pwned") is None
    assert page.js_errors == []


def test_enter_sends_and_shift_enter_makes_a_new_line(page: Any, fake_model: Any) -> None:
    fake_model.script({"text": "Got both lines."})
    new_chat(page)
    box = page.get_by_label("Message to the agent")
    box.fill("line one")
    box.press("Shift+Enter")
    box.type("line two")

    assert box.input_value() == "line one\nline two"
    expect(page.locator("#transcript li.user")).to_have_count(0)
    box.press("Enter")

    expect(page.locator("#transcript li.user .body")).to_have_text("line one\nline two")
    expect(box).to_have_value("")
    expect(assistant(page).locator(".markdown")).to_have_text("Got both lines.")


def test_queue_remove_and_steer_then_cancel_pauses_and_resume_goes_on(page: Any, fake_model: Any) -> None:
    fake_model.script(slow(WORDS), {"text": "Noted the steer."}, slow(WORDS, 0.1))
    new_chat(page)
    send(page, "first task")
    expect(page.locator("#run-state")).to_have_text("Agent is working…")

    send(page, "second, to steer")
    send(page, "third, to remove")
    pending = page.locator("#pending li")
    expect(pending).to_have_count(2)
    expect(pending.nth(0)).to_contain_text("second, to steer")
    expect(page.get_by_label("Message to the agent")).to_be_enabled()

    pending.nth(1).get_by_role("button", name="Remove").click()
    expect(pending).to_have_count(1)
    pending.nth(0).get_by_role("button", name="Steer").click()
    expect(pending).to_have_count(0)
    steered = page.locator("#transcript li.user", has_text="second, to steer")
    expect(steered).to_contain_text("steered")
    expect(assistant(page).last.locator(".markdown")).to_have_text("Noted the steer.", timeout=15_000)
    expect(page.locator("#transcript")).to_contain_text("w40")  # the first step's text is kept
    expect(page.locator("#transcript .streaming")).to_have_count(0)
    expect(page.locator("#run-state")).to_have_text("")

    send(page, "long job")
    expect(page.locator("#transcript .text.streaming")).to_contain_text("w2")
    send(page, "waits in the queue")
    expect(pending).to_have_count(1)
    page.get_by_role("button", name="Stop").click()

    expect(page.locator("#paused")).to_be_visible()
    expect(page.locator("#transcript li.assistant").last.locator(".who")).to_contain_text("cancelled")
    expect(pending.nth(0).get_by_role("button", name="Send now")).to_be_visible()
    screenshot(page, "chat-paused")
    page.get_by_role("button", name="Resume").click()

    expect(page.locator("#paused")).to_be_hidden()
    expect(pending).to_have_count(0)
    expect(assistant(page).last.locator(".markdown")).to_have_text(
        "You said: waits in the queue"
    )  # the fake model echoes


def write_file_reply(path: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": "hello"}}]}


def test_approval_dialog_shows_in_every_tab_and_closes_when_one_answers(
    page: Any, context: Any, fake_model: Any
) -> None:
    fake_model.script(
        write_file_reply("notes.txt"),
        {"text": "Saved notes.txt."},
        write_file_reply("other.txt"),
        {"text": "I could not write it."},
    )
    new_chat(page)
    send(page, "write a note")

    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("write_file")
    expect(dialog).to_contain_text("notes.txt")
    expect(dialog.get_by_role("button", name="Refuse")).to_be_focused()
    screenshot(page, "approval-dialog")

    second = context.new_page()
    second.goto(page.url)
    expect(
        second.get_by_role("dialog")
    ).to_be_visible()  # from the snapshot of a client connecting mid-confirmation
    dialog.get_by_role("button", name="Approve").click()

    expect(dialog).to_be_hidden()
    expect(second.get_by_role("dialog")).to_be_hidden()
    tool = assistant(page).locator("details.tool").first
    expect(tool.locator(".tool-status")).to_have_text("done")
    expect(assistant(page).last.locator(".markdown")).to_have_text("Saved notes.txt.")
    expect(second.locator("#transcript .markdown").last).to_have_text("Saved notes.txt.")

    send(page, "write another")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Refuse").click()
    expect(dialog).to_be_hidden()
    expect(assistant(page).last.locator(".markdown")).to_have_text("I could not write it.")
    refused = page.locator("#transcript details.tool.error")
    expect(refused).to_have_count(1)
    second.close()


def test_reload_mid_turn_shows_the_whole_answer_once(page: Any, fake_model: Any) -> None:
    fake_model.script(slow(WORDS, 0.1))
    new_chat(page)
    send(page, "count slowly")
    expect(page.locator("#transcript .text.streaming")).to_contain_text("w5")

    page.reload()
    expect(page.locator("#conn")).to_have_text("connected")
    expect(page.locator("#transcript .text.streaming")).to_contain_text("w1 w2 w3 w4 w5")  # already there
    expect(assistant(page).locator(".markdown")).to_have_text(WORDS, timeout=15_000)

    expect(page.locator("#transcript li.user")).to_have_count(1)
    expect(assistant(page)).to_have_count(1)
    page.reload()
    expect(assistant(page).locator(".markdown")).to_have_text(WORDS)
    expect(assistant(page)).to_have_count(1)


def test_switching_chats_mid_turn_and_back_keeps_the_stream(page: Any, fake_model: Any) -> None:
    fake_model.script(slow(WORDS, 0.1))
    new_chat(page)
    send(page, "count again")
    chat_url = page.url
    expect(page.locator("#transcript .text.streaming")).to_contain_text("w3")
    new_chat(page)  # another chat, then back
    page.goto(chat_url)

    expect(assistant(page).locator(".markdown")).to_have_text(WORDS, timeout=15_000)
    expect(assistant(page)).to_have_count(1)
    assert page.js_errors == []


def test_a_message_refused_for_now_goes_again_with_its_id_and_is_answered_once(
    page: Any, fake_model: Any, portal_server: Any
) -> None:
    """The server said `unavailable` (an outage; docs/deployment.md): the portal sends the message again
    with the same id, and the answer comes once, without an error shown."""
    import json

    refused: list[str] = []
    sent: list[str] = []

    def between(ws: Any) -> None:
        server = ws.connect_to_server()

        def from_page(raw: Any) -> None:
            frame = json.loads(raw)
            if frame.get("type") == "message":
                sent.append(frame["message_id"])
                if not refused:  # the first one meets an outage
                    refused.append(frame["message_id"])
                    error = {"code": "unavailable", "message": "The database does not answer; try again."}
                    ws.send(
                        json.dumps({"type": "error", "data": {**error, "message_id": frame["message_id"]}})
                    )
                    return
            server.send(raw)

        ws.on_message(from_page)
        server.on_message(lambda raw: ws.send(raw))

    page.route_web_socket(re.compile(r"/api/v1/chat/ws/"), between)
    fake_model.script(slow("Here I am.", 0.02))
    new_chat(page)
    send(page, "Are you there?")
    expect(assistant(page).locator(".text.markdown")).to_have_text("Here I am.")
    assert sent == [refused[0], refused[0]]  # the same id, twice: once refused, once stored
    expect(page.locator("#transcript li.user")).to_have_count(1)
    expect(page.locator("#transcript li.error, #notices [role=alert]")).to_have_count(0)
