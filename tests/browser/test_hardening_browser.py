"""Browser hardening as a person meets it (docs/protocol.md §6.2, §6.5): pages that are not the portal's own
(the API docs, the admin) work under the Content-Security-Policy without a console error, and the login
page says how long to wait once it is locked. The portal's own pages: test_quality_browser.py (every page,
no console error, which is where a CSP violation shows)."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import ADMIN, screenshot
from tests.browser.quality import assert_clean, watch
from tests.support.server import serve, server_env


def test_the_api_docs_page_works_under_the_policy(page: Any) -> None:
    problems = watch(page)
    page.goto("/api/v1/docs/")
    expect(page.locator(".swagger-ui .information-container")).to_contain_text("agentsite API")
    expect(page.locator(".opblock").first).to_be_visible()  # the operations, from the schema it fetched
    page.locator(".opblock-summary").first.click()
    expect(page.locator(".opblock-body").first).to_be_visible()
    assert problems == [], problems
    screenshot(page, "api-docs")


def test_the_api_docs_send_a_visitor_to_log_in(browser: Any, portal_server: Any) -> None:
    ctx = browser.new_context(base_url=portal_server.base_url)
    page = ctx.new_page()
    page.goto("/api/v1/docs/")
    assert page.url.endswith("/login/?next=/api/v1/docs/")
    ctx.close()


def test_admin_pages_work_under_the_policy(page: Any) -> None:
    problems = watch(page)
    for path in ("/admin/", "/admin/auth/user/", "/admin/auth/user/add/", "/admin/axes/accessattempt/"):
        page.goto(path)
        expect(page.locator("#content")).to_be_visible()
        assert problems == [], (path, problems)
    page.goto("/admin/auth/user/")
    page.get_by_role("link", name=ADMIN["username"], exact=True).click()
    expect(page.get_by_label("Username:")).to_have_value(ADMIN["username"])
    assert problems == [], problems


def test_a_locked_login_says_how_long_to_wait(browser: Any, tmp_path: Any) -> None:
    with server_env(tmp_path, AGENTSITE_RATE_LOGIN="2/15min") as env, serve(env) as server:
        ctx = browser.new_context(base_url=server.base_url)
        page = ctx.new_page()
        problems = watch(page)
        page.goto("/setup/")
        page.get_by_label("Username").fill(ADMIN["username"])
        page.get_by_label("Password", exact=True).fill(ADMIN["password"])
        page.get_by_label("Password (again)").fill(ADMIN["password"])
        page.get_by_role("button", name="Create the admin account").click()
        page.wait_for_url(server.base_url + "/")
        page.get_by_role("button", name="Log out").click()
        page.wait_for_url(re.compile(r"/login/$"))

        for password in ("wrong", "still wrong", ADMIN["password"]):
            page.get_by_label("Username").fill(ADMIN["username"])
            page.get_by_label("Password").fill(password)
            page.get_by_role("button", name="Log in").click()
            page.wait_for_load_state()

        expect(page.get_by_role("alert")).to_have_text(
            "Too many failed attempts. Wait 15 minutes before you try again."
        )
        expect(page.get_by_label("Username")).to_have_value(ADMIN["username"])
        assert page.url.endswith("/login/")  # still out
        # The browser reports the page's own 429 as an error of that page; nothing else may be logged.
        problems[:] = [p for p in problems if not (p.endswith(" @ " + page.url) and "429" in p)]
        assert_clean(page, "locked login")
        screenshot(page, "login-locked")
        ctx.close()
