"""The everyday features of the portal in a real browser: the chat header's pickers, message actions, the
chat list (search, rename, archive, delete with undo), drafts that store nothing, live titles, retry after a
provider failure, the workspace panel, the theme, and the phone layout."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from playwright.sync_api import expect

from agents.services import ENV_PROVIDER_ID
from agentsite.dev.fake_llm import remote_requests
from tests.browser.conftest import screenshot
from tests.browser.quality import overflow, settled, watch
from tests.browser.test_chat_browser import WORDS, new_chat, send, slow
from tests.browser.test_quality_browser import PHONE, call_api, open_context

SESSIONS = "/api/v1/chat/sessions"


def sessions(page: Any, query: str = "") -> list[dict[str, Any]]:
    return list(call_api(page, "GET", f"{SESSIONS}?limit=500&{query}")["results"])


def test_model_and_approval_pickers_travel_with_each_message(page: Any, fake_model: Any) -> None:
    page.goto("/")
    call_api(
        page, "PATCH", f"/api/v1/providers/{ENV_PROVIDER_ID}", {"models": ["fake-model", "fake-model-2"]}
    )
    fake_model.script({"text": "from the second model"})
    new_chat(page)
    page.locator("#model-select").select_option("fake-model-2")
    send(page, "which model?")
    expect(page.locator("#transcript .markdown").last).to_have_text("from the second model")
    assert remote_requests(fake_model.base_url)[-1]["model"] == "fake-model-2"

    page.get_by_label("Approvals").select_option("full_access")
    fake_model.script(
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "x"}}]},
        {"text": "Written."},
    )
    send(page, "write without asking")
    expect(page.locator("#transcript .markdown").last).to_have_text("Written.")
    expect(page.get_by_role("dialog")).to_be_hidden()  # full access: no question
    page.reload()
    expect(page.get_by_label("Approvals")).to_have_value("full_access")
    expect(page.locator("#model-select")).to_have_value("fake-model-2")  # remembered in this browser


def test_copy_regenerate_and_edit_keep_both_messages_and_show_how_they_relate(
    page: Any, context: Any, fake_model: Any
) -> None:
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    fake_model.script({"text": "First answer."}, {"text": "Second answer."}, {"text": "Answer to the edit."})
    new_chat(page)
    send(page, "tell me something")
    expect(page.locator("#transcript .markdown").last).to_have_text("First answer.")

    page.get_by_role("button", name="Copy the answer").click()
    assert page.evaluate("navigator.clipboard.readText()") == "First answer."
    page.get_by_role("button", name="Regenerate the answer").click()
    expect(page.locator("#transcript .markdown").last).to_have_text("Second answer.")
    again = page.locator("#transcript li.user").nth(1)
    expect(again).to_contain_text("asked again")
    expect(again.locator(".body")).to_have_text("tell me something")

    settled(page)
    page.locator("#transcript li.user").first.get_by_role("button", name="Edit your message").click()
    page.get_by_role("textbox", name="Your message, edited").fill("tell me something else")
    page.get_by_role("button", name="Send edited").click()
    expect(page.locator("#transcript .markdown").last).to_have_text("Answer to the edit.")
    settled(page)
    page.reload()
    settled(page)
    users = page.locator("#transcript li.user")
    expect(users).to_have_count(3)  # the history keeps all of them
    expect(users.nth(2)).to_contain_text("edited")
    expect(users.nth(2).get_by_role("link", name="the original")).to_have_attribute(
        "href", re.compile("^#u-")
    )


def test_a_draft_stores_nothing_and_the_title_arrives_without_a_reload(page: Any, fake_model: Any) -> None:
    page.goto("/")
    before = len(sessions(page))
    page.goto("/chat/new")
    page.goto("/")
    assert len(sessions(page)) == before  # visiting "New chat" made no empty chat

    fake_model.script({"text": "Sure."})
    new_chat(page)
    send(page, "Plan the garden party")
    expect(page.locator("#chat-title")).to_have_text("Plan the garden party")
    expect(page).to_have_title(re.compile("^Plan the garden party"))
    expect(page.locator("#sessions a[aria-current]")).to_have_text("Plan the garden party")
    assert len(sessions(page)) == before + 1


def test_the_chat_list_searches_renames_archives_and_deletes_with_undo(page: Any, fake_model: Any) -> None:
    fake_model.script({"text": "The answer mentions zebras."})
    new_chat(page)
    send(page, "something about animals")
    expect(page.locator("#transcript .markdown").last).to_have_text("The answer mentions zebras.")
    chat_id = page.url.rsplit("/", 1)[1]
    page.goto("/")
    sidebar = page.get_by_role("navigation", name="Your chats")
    expect(sidebar.locator(".group").first).to_have_text("Today")

    sidebar.get_by_label("Search your chats").fill("ZEBRAS")  # content, case-insensitive
    expect(sidebar.locator("li.item")).to_have_count(1)
    item = sidebar.locator("li.item").first
    item.get_by_label(re.compile("^Actions for")).click()
    item.get_by_role("button", name="Rename").click()
    sidebar.get_by_label(re.compile("^New title for")).fill("Zoo plans")
    sidebar.get_by_label(re.compile("^New title for")).press("Enter")
    expect(item.get_by_role("link")).to_have_text("Zoo plans")
    assert call_api(page, "GET", f"{SESSIONS}/{chat_id}")["title"] == "Zoo plans"

    item.get_by_label("Actions for Zoo plans").click()
    item.get_by_role("button", name="Archive").click()
    expect(page.locator("#toast")).to_contain_text("archived")
    sidebar.get_by_label("Search your chats").fill("")
    expect(sidebar.get_by_role("link", name="Zoo plans")).to_have_count(0)
    sidebar.get_by_role("button", name="Show archived").click()
    expect(sidebar.get_by_role("link", name="Zoo plans")).to_have_count(1)
    sidebar.locator("li.item", has_text="Zoo plans").get_by_label("Actions for Zoo plans").click()
    sidebar.get_by_role("button", name="Unarchive").click()
    sidebar.get_by_role("button", name="Show recent chats").click()

    row = sidebar.locator("li.item", has_text="Zoo plans")
    row.get_by_label("Actions for Zoo plans").click()
    row.get_by_role("button", name="Delete").click()
    expect(sidebar.get_by_role("link", name="Zoo plans")).to_have_count(0)
    page.locator("#toast").get_by_role("button", name="Undo").click()
    expect(sidebar.get_by_role("link", name="Zoo plans")).to_have_count(1)
    assert call_api(page, "GET", f"{SESSIONS}/{chat_id}")["status"] == "open"  # nothing was sent
    row.get_by_label("Actions for Zoo plans").click()
    row.get_by_role("button", name="Delete").click()
    page.goto("/settings/keys")  # leaving within the Undo time still deletes it
    page.wait_for_function(
        "id => fetch('/api/v1/chat/sessions/' + id).then(r => r.json()).then(s => s.status === 'closed')",
        arg=chat_id,
    )
    assert chat_id not in [s["session_id"] for s in sessions(page)]


def test_a_provider_failure_offers_retry(page: Any, fake_model: Any) -> None:
    fake_model.script({"status": 400, "error_message": "the provider is down"}, {"text": "Back again."})
    new_chat(page)
    send(page, "are you there?")
    failed = page.locator("#transcript li.assistant[data-status='error']")
    expect(failed.locator(".failure")).to_contain_text("The model could not answer")
    failed.get_by_role("button", name="Retry the answer").click()
    expect(page.locator("#transcript .markdown").last).to_have_text("Back again.")


def test_the_workspace_panel_uploads_previews_refreshes_live_and_deletes(
    page: Any, fake_model: Any, tmp_path: Any
) -> None:
    watch(page)
    fake_model.script({"text": "Ready."})
    new_chat(page)
    send(page, "hello")
    expect(page.locator("#transcript .markdown").last).to_have_text("Ready.")
    page.get_by_role("button", name="Files").click()
    panel = page.get_by_role("complementary", name="Workspace")
    expect(panel).to_contain_text("The workspace is empty.")
    upload = tmp_path / "script.py"
    upload.write_text("def hello():\n    return 'hi'\n")
    panel.locator("#file-upload").set_input_files(str(upload))
    panel.get_by_role("button", name="script.py", exact=True).click()
    expect(panel.locator(".file-preview code .tok-keyword").first).to_have_text("def")
    href = panel.get_by_role("link", name="Download script.py").get_attribute("href")
    assert href and page.request.get(href).body() == upload.read_bytes()

    big = tmp_path / "big.bin"
    with big.open("wb") as handle:
        handle.truncate(25 * 1024 * 1024 + 1)  # one byte over AGENTSITE_MAX_UPLOAD_BYTES' default
    panel.locator("#file-upload").set_input_files(str(big))
    expect(panel.locator("#files-status")).to_contain_text("big.bin is larger than the limit of 25.0 MB")
    expect(panel.get_by_role("button", name="big.bin", exact=True)).to_have_count(0)
    image = tmp_path / "dot.png"
    image.write_bytes(PNG)
    panel.locator("#file-upload").set_input_files(str(image))
    panel.get_by_role("button", name="dot.png", exact=True).click()
    preview = panel.get_by_role("img", name="Preview of dot.png")
    expect(preview).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth === 1", arg=preview.element_handle())

    page.get_by_label("Approvals").select_option("full_access")
    fake_model.script(
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "out/report.md", "content": "# Done"}}]},
        {"text": "Wrote it."},
    )
    send(page, "write a report")
    expect(panel.get_by_role("button", name="▸ out/", exact=True)).to_be_visible()  # no click on Refresh
    page.once("dialog", lambda d: d.accept())
    panel.get_by_role("button", name="Delete script.py").click()
    expect(panel.get_by_role("button", name="script.py", exact=True)).to_have_count(0)
    assert page.quality_problems == []  # type: ignore[attr-defined]


# A 1×1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8cfc0f01f"
    "00050001ff89993d1d0000000049454e44ae426082"
)


def test_the_chat_list_folds_away_and_stays_folded(page: Any, fake_model: Any) -> None:
    fake_model.script({"text": "ok"})
    new_chat(page)
    send(page, "hi")
    sidebar = page.get_by_role("navigation", name="Your chats")
    toggle = page.get_by_role("button", name="Chats", exact=True)
    expect(toggle).to_have_attribute("aria-expanded", "true")
    toggle.click()
    expect(sidebar).to_be_hidden()
    page.reload()
    expect(sidebar).to_be_hidden()  # remembered
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(sidebar).to_be_visible()


def test_the_theme_is_remembered_and_the_pattern_fields_validate(page: Any) -> None:
    page.goto("/settings/providers")
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    page.get_by_role("button", name="Dark").click()
    page.reload()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    page.get_by_role("button", name="Light").click()
    field = page.locator("#new-id")
    field.fill("bad id!")
    assert page.evaluate("document.getElementById('new-id').checkValidity()") is False
    field.fill("good-id_1")
    assert page.evaluate("document.getElementById('new-id').checkValidity()") is True


def test_last_used_says_just_now(page: Any, portal_server: Any) -> None:
    page.goto("/settings/keys")
    page.get_by_label("Name").fill("fresh")
    page.get_by_role("button", name="Create key").click()
    expect(page.get_by_label("New API key")).to_have_value(re.compile("^ask_"))
    key = page.get_by_label("New API key").input_value()
    httpx.get(
        portal_server.base_url + "/api/v1/chat/sessions",
        headers={"Authorization": f"Bearer {key}"},
        timeout=5,
    )
    page.reload()
    expect(page.locator("#keys tr", has_text="fresh")).to_contain_text("just now")


def test_the_phone_layout_keeps_everything_on_screen(
    browser: Any, portal_server: Any, admin_state: Any, fake_model: Any
) -> None:
    ctx = open_context(browser, portal_server, admin_state, PHONE, "light")
    page = ctx.new_page()
    page.goto("/")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav).to_be_hidden()
    page.get_by_role("button", name="Menu").click()
    expect(nav.get_by_role("link", name="Providers")).to_be_visible()

    fake_model.script(slow(WORDS, 0.1))
    page.goto("/chat/new")
    page.get_by_label("Message to the agent").fill("start something long")
    page.get_by_label("Message to the agent").press("Enter")
    expect(page.locator("#transcript .text.streaming")).to_contain_text("w2")
    long = "a queued message that is much longer than thirty characters and keeps going " * 3
    page.get_by_label("Message to the agent").fill(long)
    page.get_by_label("Message to the agent").press("Enter")
    expect(page.locator("#pending li")).to_have_count(1)
    assert overflow(page) == 0
    for name in ("Steer", "Remove", "Close chat", "Send"):
        box = page.get_by_role("button", name=name, exact=True).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], name
    screenshot(page, "chat-queue-phone")
    page.get_by_role("button", name="Chats", exact=True).click()
    expect(page.get_by_role("navigation", name="Your chats")).to_be_visible()
    page.get_by_role("button", name="Close the chat list").click()
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#paused")).to_be_visible()
    for name in ("Send now", "Resume", "Remove"):
        box = page.get_by_role("button", name=name, exact=True).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], name
    assert overflow(page) == 0
    screenshot(page, "chat-paused-phone")

    page.goto("/settings/keys")
    page.get_by_label("Name").fill("phone key")
    page.get_by_role("button", name="Create key").click()
    expect(page.get_by_label("New API key")).to_have_value(re.compile("^ask_"))  # created before the reload
    page.reload()
    revoke = page.get_by_role("button", name="Revoke phone key")
    box = revoke.bounding_box()
    assert box is not None and box["x"] + box["width"] <= PHONE["width"]
    assert overflow(page) == 0
    ctx.close()


def test_tool_and_external_agent_approvals_show_the_same_buttons_in_the_same_order(
    page: Any, fake_model: Any
) -> None:
    """Later, then the refusals, then the approvals with the one-time approval last (primary): for a shell
    command (highlighted) as for an external agent's permission request; Ctrl+Enter approves."""
    from tests.acp.support import runner_body

    options = json.dumps(
        [
            ["always", "Always allow", "allow_always"],
            ["allow", "Allow once", "allow_once"],
            ["reject", "Reject", "reject_once"],
        ]
    )
    body = runner_body("permission", marker="order", env={"ACP_MOCK_PERMISSION_OPTIONS": options})
    page.goto("/")
    call_api(page, "PUT", "/api/v1/agents/default/config/acp/asker", body)
    call_api(page, "PUT", "/api/v1/agents/default/tools/delegate_external_agent", {"enabled": True})
    try:
        fake_model.script(
            {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hi && ls"}}]},
            {
                "tool_calls": [
                    {
                        "name": "delegate_external_agent",
                        "arguments": {"action": "start", "runner": "asker", "message": "go"},
                    }
                ]
            },
            {"text": "All done."},
        )
        new_chat(page)
        send(page, "run things")
        dialog = page.get_by_role("dialog")
        expect(dialog.locator("#confirm-command .tok-keyword").first).to_have_text("echo")
        buttons = dialog.locator("#confirm-actions button")
        expect(buttons).to_have_text(["Later", "Refuse", "Approve"])
        page.keyboard.press("Escape")  # Esc refuses the shell command
        expect(dialog).to_contain_text("delegate_external_agent")  # the next question: the tool itself
        page.keyboard.press("Control+Enter")
        expect(dialog).to_contain_text("The external agent asks: Run a command")
        expect(buttons).to_have_text(["Later", "Reject", "Always allow", "Allow once"])
        expect(dialog.locator("#confirm-actions button.primary")).to_have_text("Allow once")
        page.keyboard.press("Control+Enter")
        expect(page.locator("#transcript .markdown").last).to_have_text("All done.", timeout=30_000)
        expect(page.locator("#transcript details.tool").nth(1)).to_contain_text("selected allow")
        expect(page.locator("#transcript details.tool.error").first).to_contain_text("Refused by the user")
    finally:
        call_api(page, "PUT", "/api/v1/agents/default/tools/delegate_external_agent", {"enabled": False})
        call_api(page, "DELETE", "/api/v1/agents/default/config/acp/asker")
