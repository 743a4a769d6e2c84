"""Nothing a person types is lost (issue 31 items 1 and 2): a message over the server's limits stays in the
composer with the limit said, and never loops the socket; a message typed after the browser session ended
survives a sign-in, which returns to the chat."""

from __future__ import annotations

import re
import time
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import ADMIN, screenshot
from tests.browser.test_chat_browser import assistant, new_chat, send

MEGABYTE = 1_000_000


def composer_value(page: Any) -> str:
    return str(page.eval_on_selector("#input", "el => el.value"))


def sockets_opened(page: Any) -> list[Any]:
    opened: list[Any] = []
    page.on("websocket", lambda ws: opened.append(ws) if "/api/v1/chat/ws/" in ws.url else None)
    return opened


def open_chat(page: Any) -> None:
    new_chat(page)
    send(page, "hello")
    expect(assistant(page).first).to_contain_text("hello")


def test_a_one_megabyte_paste_stays_in_the_composer_says_the_limit_and_sends_nothing(page: Any) -> None:
    open_chat(page)
    opened = sockets_opened(page)
    text = "a" * MEGABYTE

    page.get_by_label("Message to the agent").fill(text)
    page.get_by_label("Message to the agent").press("Enter")

    expect(page.locator("#notices")).to_contain_text(
        "This message is 1,000,000 characters; a message may hold at most 100,000."
    )
    expect(page.get_by_label("Message to the agent")).to_have_attribute("aria-invalid", "true")
    time.sleep(3)
    assert composer_value(page) == text
    assert opened == []  # the socket never dropped
    expect(page.locator("#conn")).to_have_text("connected")
    expect(page.locator("#transcript li.user")).to_have_count(1)
    assert page.js_errors == []  # type: ignore[attr-defined]
    screenshot(page, "composer-too-long")


def test_a_frame_over_the_servers_limit_comes_back_to_the_composer_without_a_reconnect_loop(
    page: Any,
) -> None:
    """A page that believes the limits are higher (as behind a proxy with a lower one) sends the frame
    (the page reads its limits when it sends):
    the server closes with 1009; the text returns, the socket reconnects once, and nothing is resent."""

    open_chat(page)
    page.eval_on_selector("#chat", "el => { el.dataset.maxContent = el.dataset.maxFrame = '1000000000'; }")
    opened = sockets_opened(page)
    text = "b" * (1_200_000)

    page.get_by_label("Message to the agent").fill(text)
    page.get_by_label("Message to the agent").press("Enter")

    expect(page.locator("#notices")).to_contain_text("The message was not sent: at 1,2")
    expect(page.locator("#notices")).to_contain_text("It is back in the composer.")
    expect(page.locator("#conn")).to_have_text("connected")
    time.sleep(5)
    assert composer_value(page) == text
    assert len(opened) == 1, f"{len(opened)} sockets opened in ~6 s"  # one reconnect, no loop
    expect(page.locator("#conn")).to_have_text("connected")
    expect(page.locator("#transcript li.user")).to_have_count(1)


def own_login(browser: Any, server: Any) -> tuple[Any, Any]:
    ctx = browser.new_context(base_url=server.base_url, viewport={"width": 1280, "height": 860})
    ctx.set_default_timeout(10_000)
    page = ctx.new_page()
    page.goto("/login/")
    page.get_by_label("Username").fill(ADMIN["username"])
    page.get_by_label("Password").fill(ADMIN["password"])
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(server.base_url + "/")
    return ctx, page


def end_session(ctx: Any) -> None:
    """The session ends elsewhere (another tab logs out; an expiry looks the same to the page)."""
    other = ctx.new_page()
    other.goto("/")
    other.get_by_role("button", name="Log out").click()
    other.wait_for_url(re.compile(r"/login/$"))
    other.close()


def test_a_message_typed_after_the_session_ended_survives_the_sign_in_that_returns_to_the_chat(
    browser: Any, portal_server: Any, admin_state: Any
) -> None:
    """A login of its own (the other tests' is shared), ended by a logout in another tab."""
    ctx, page = own_login(browser, portal_server)
    open_chat(page)
    chat_path = page.url.removeprefix(portal_server.base_url)

    end_session(ctx)

    expect(page.locator("#conn")).to_have_text("signed out")
    sign_in = page.get_by_role("link", name="Sign in again")
    expect(sign_in).to_have_attribute("href", "/login/?next=" + chat_path.replace("/", "%2F"))
    typed = "typed after the session ended\nsecond line"
    page.get_by_label("Message to the agent").fill(typed)
    page.get_by_label("Message to the agent").press("Enter")
    expect(page.locator("#notices")).to_contain_text("sign in again to send this")
    assert composer_value(page) == typed
    screenshot(page, "composer-signed-out")

    sign_in.click()  # at once: the copy in the browser must not wait for a timer
    page.wait_for_url(re.compile(r"/login/\?next="))
    page.get_by_label("Username").fill(ADMIN["username"])
    page.get_by_label("Password").fill(ADMIN["password"])
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(portal_server.base_url + chat_path)
    expect(page.locator("#conn")).to_have_text("connected")
    expect(page.get_by_label("Message to the agent")).to_have_value(typed)

    page.get_by_label("Message to the agent").press("Enter")
    expect(page.locator("#transcript li.user").last).to_contain_text("second line")
    expect(page.get_by_label("Message to the agent")).to_have_value("")
    page.reload()
    expect(page.locator("#conn")).to_have_text("connected")
    expect(page.get_by_label("Message to the agent")).to_have_value("")  # sent: the browser's copy is gone
    drafts = page.evaluate("() => Object.keys(localStorage).filter((k) => k.startsWith('agentsite:draft:'))")
    assert drafts == []
    ctx.close()


def test_a_new_chats_first_message_after_the_session_ended_stays_with_a_sign_in_link(
    browser: Any, portal_server: Any, admin_state: Any
) -> None:
    ctx, page = own_login(browser, portal_server)
    new_chat(page)
    end_session(ctx)
    typed = "the first message of a chat, typed too late"

    page.get_by_label("Message to the agent").fill(typed)
    page.get_by_label("Message to the agent").press("Enter")

    expect(page.locator("#conn")).to_have_text("signed out")
    sign_in = page.get_by_role("link", name="Sign in again")
    expect(sign_in).to_have_attribute("href", "/login/?next=%2Fchat%2Fnew")
    expect(page.get_by_label("Message to the agent")).to_have_value(typed)
    page.reload()  # the login page now; the text waits in this browser for the new chat page
    page.get_by_label("Username").fill(ADMIN["username"])
    page.get_by_label("Password").fill(ADMIN["password"])
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/chat/new$"))
    expect(page.get_by_label("Message to the agent")).to_have_value(typed)
    ctx.close()
