"""The chat page's layout where it broke (issue 31 item 4): the files panel at a 1366 px laptop width (the
preview's Copy button landed on "Log out", bubbles were cut off), the chat list's ⋯ menu (clipped by the
list), tool names (wrapped mid-word), a phone's header (27 % of the screen), and a second tab (a message
queued elsewhere showed as "(message)", a chat made elsewhere never reached its list)."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.browser.test_chat_browser import WORDS, new_chat, send, slow
from tests.browser.test_quality_browser import PHONE, call_api, open_context

LAPTOP = {"width": 1366, "height": 768}
CODE = "def greet(name: str) -> str:\n    return f'hello {name}'  # " + "a comment that runs long " * 4 + "\n"


def box(locator: Any) -> dict[str, float]:
    found = locator.bounding_box()
    assert found is not None, locator
    return dict(found)


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def lines(locator: Any) -> int:
    """On how many lines an inline element's text lies."""
    tops = "el => new Set(Array.from(el.getClientRects()).map(r => Math.round(r.top))).size"
    return int(locator.evaluate(tops))


def shown_at_its_centre(page: Any, locator: Any) -> bool:
    """Whether the element is what a click at its centre reaches (not clipped away or covered)."""
    return bool(
        locator.evaluate(
            """el => { const r = el.getBoundingClientRect();
                const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
                return !!hit && (hit === el || el.contains(hit)); }"""
        )
    )


def test_at_1366_px_with_the_files_panel_open_nothing_overlaps_or_is_cut_off(
    browser: Any, portal_server: Any, admin_state: Any, fake_model: Any
) -> None:
    ctx = open_context(browser, portal_server, admin_state, LAPTOP, "light")
    page = ctx.new_page()
    fake_model.script(
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "greet.py", "content": CODE}}]},
        {"text": "Wrote greet.py."},
    )
    new_chat(page)
    page.get_by_label("Approvals").select_option("full_access")
    long = "Please write a small greeting function in Python and keep it short, with a type hint " * 2
    send(page, long)
    expect(page.locator("#transcript .markdown").last).to_have_text("Wrote greet.py.")
    page.get_by_role("button", name="Files").click()
    panel = page.get_by_role("complementary", name="Workspace")
    panel.get_by_role("button", name="greet.py", exact=True).click()
    copy = panel.locator(".file-preview .copy-code")
    expect(copy).to_be_visible()
    screenshot(page, "files-panel-1366")

    log_out = page.get_by_role("button", name="Log out")
    assert not overlaps(box(copy), box(log_out)), "the preview's Copy button covers Log out"
    assert overlaps(box(copy), box(panel.locator(".file-preview pre"))), "Copy sits on its code"
    transcript = box(page.locator("#transcript"))
    for bubble in page.locator("#transcript li.msg.user .body").all():
        right = box(bubble)["x"] + box(bubble)["width"]
        assert right <= transcript["x"] + transcript["width"] + 0.5, "a bubble is cut off at the right"
        assert box(bubble)["x"] >= transcript["x"]
    assert lines(page.locator("#transcript details.tool .tool-name").first) == 1, "the tool name wraps"
    ctx.close()


def test_the_chat_lists_menu_is_not_clipped_by_the_list(page: Any, fake_model: Any) -> None:
    page.goto("/")
    for n in range(3):
        call_api(page, "POST", "/api/v1/chat/sessions", {"title": f"Menu test {n}"})
    page.reload()
    items = page.get_by_role("navigation", name="Your chats").locator("li.item")
    last = items.last
    last.locator("summary").click()
    menu = last.locator(".menu")
    expect(menu).to_be_visible()
    for name in ("Rename", "Archive", "Delete"):
        assert shown_at_its_centre(page, menu.get_by_role("button", name=name)), name
    first = items.first
    first.locator("summary").click()
    assert shown_at_its_centre(page, first.locator(".menu").get_by_role("button", name="Delete"))


def test_a_phones_chat_header_is_compact(
    browser: Any, portal_server: Any, admin_state: Any, fake_model: Any
) -> None:
    ctx = open_context(browser, portal_server, admin_state, PHONE, "light")
    page = ctx.new_page()
    fake_model.script({"text": "ok"})
    page.goto("/chat/new")
    send(page, "a chat with a title long enough to need more than one line on a phone, surely")
    expect(page.locator("#transcript .markdown").last).to_have_text("ok")
    screenshot(page, "chat-header-phone")

    header = box(page.locator(".chat-head"))
    topbar = box(page.locator("header.topbar"))
    assert header["height"] < 0.15 * PHONE["height"], f"the chat header is {header['height']} px high"
    assert topbar["height"] + header["height"] < 0.22 * PHONE["height"]
    for name in ("Chats", "Files"):
        control = box(page.get_by_role("button", name=name, exact=True))
        assert control["x"] >= 0 and control["x"] + control["width"] <= PHONE["width"], name
    for label in ("Model", "Approvals"):  # in the header: the list may hold a chat titled "which model?"
        assert page.locator(".chat-head").get_by_label(label).is_visible(), label
    ctx.close()


def test_a_message_queued_in_another_tab_shows_its_text_and_new_chats_reach_the_other_list(
    page: Any, context: Any, fake_model: Any
) -> None:
    fake_model.script(slow(WORDS, 0.1))
    new_chat(page)
    send(page, "a long first task")
    expect(page.locator("#transcript .text.streaming")).to_contain_text("w2")
    other = context.new_page()
    other.goto(page.url)
    expect(other.locator("#conn")).to_have_text("connected")

    send(page, "queued from the first tab")

    pending = other.locator("#pending li")
    expect(pending).to_have_count(1)
    expect(pending.first).to_contain_text("queued from the first tab")
    expect(pending.first).not_to_contain_text("(message)")
    expect(other.locator("#transcript li.user", has_text="queued from the first tab")).to_have_count(
        1, timeout=15_000
    )  # when it starts, the other tab's bubble has its text too

    made = call_api(page, "POST", "/api/v1/chat/sessions", {"title": "Made in another tab"})
    other_list = other.get_by_role("navigation", name="Your chats")
    other.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    expect(other_list.get_by_role("link", name="Made in another tab")).to_be_visible()
    call_api(page, "PATCH", f"/api/v1/chat/sessions/{made['session_id']}", {"title": "Renamed elsewhere"})
    other.evaluate("window.dispatchEvent(new Event('focus'))")
    expect(other_list.get_by_role("link", name="Renamed elsewhere")).to_be_visible()
    expect(other_list.get_by_role("link", name=re.compile("Made in another tab"))).to_have_count(0)
    other.close()


def test_tool_names_break_only_after_an_underscore(
    browser: Any, portal_server: Any, admin_state: Any
) -> None:
    for viewport in (LAPTOP, PHONE):
        ctx = open_context(browser, portal_server, admin_state, viewport, "light")
        page = ctx.new_page()
        page.goto("/settings/agents/default")
        names = page.locator("table.list label.identifier")
        expect(names.first).to_be_visible()
        assert "delegate_external_agent" in names.all_inner_texts()
        broken = page.evaluate(
            """() => Array.from(document.querySelectorAll("table.list label.identifier")).flatMap(label =>
                Array.from(label.childNodes).filter(n => n.nodeType === 3).filter(n => {
                    const range = document.createRange(); range.selectNodeContents(n);
                    return new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))).size > 1;
                }).map(n => n.textContent))"""
        )
        assert broken == [], f"at {viewport['width']} px these parts of tool names wrap mid-word: {broken}"
        ctx.close()


def test_a_chat_waiting_for_a_turn_slot_says_why_and_starts_when_one_ends(page: Any, fake_model: Any) -> None:
    fake_model.script(*[slow(WORDS, 0.15) for _ in range(4)], {"text": "My turn came."})
    page.goto("/")
    for n in range(4):  # AGENTSITE_USER_MAX_CONCURRENT_TURNS' default: all of the admin's turn slots
        made = call_api(page, "POST", "/api/v1/chat/sessions", {"title": f"Busy {n}"})
        call_api(page, "POST", f"/api/v1/chat/sessions/{made['session_id']}/messages", {"content": "go"})

    new_chat(page)
    send(page, "and this one?")

    reason = page.locator("#pending li .wait-reason")
    expect(reason).to_have_text(
        "Waiting for a free turn: 4 of your chats are running (at most 4 at once); "
        "this one starts when one of them ends."
    )
    screenshot(page, "fair-share-wait")
    expect(page.locator("#transcript .markdown").last).to_have_text("My turn came.", timeout=30_000)
    expect(page.locator("#pending li")).to_have_count(0)
