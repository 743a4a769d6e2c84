"""Portal pages with Django's test client: they render, show only the user's own data, refuse others'."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest
from django.test import Client

from accounts.services import api_key_create
from cron.inbox import inbox_item_create
from tests import factories

PASSWORD = "pw-for-tests-123"
EVERY_USER_PAGES = ["/", "/settings/keys", "/jobs", "/inbox"]
STAFF_PAGES = ["/settings/agents", "/settings/agents/default", "/settings/providers"]


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("path", EVERY_USER_PAGES + STAFF_PAGES)
def test_pages_send_anonymous_visitors_to_login(client: Client, alice: Any, path: str) -> None:
    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.parametrize("path", EVERY_USER_PAGES)
def test_every_user_page_renders_for_a_plain_user(alice: Any, path: str) -> None:
    response = logged_in(alice).get(path)

    assert response.status_code == 200
    assert b'<main id="main"' in response.content


@pytest.mark.parametrize("path", STAFF_PAGES)
def test_staff_pages_refuse_a_plain_user(alice: Any, path: str) -> None:
    assert logged_in(alice).get(path).status_code == 403


@pytest.mark.parametrize("path", STAFF_PAGES)
def test_staff_pages_render_for_staff(staff: Any, path: str) -> None:
    response = logged_in(staff).get(path)

    assert response.status_code == 200


def test_staff_links_show_only_for_staff(alice: Any, staff: Any) -> None:
    assert b"/settings/providers" not in logged_in(alice).get("/").content
    assert b"/settings/providers" in logged_in(staff).get("/").content


def test_agent_page_lists_tool_switches_with_their_api(staff: Any) -> None:
    content = logged_in(staff).get("/settings/agents/default").content.decode()

    assert 'data-api="/api/v1/agents/default/tools/write_file"' in content
    assert 'data-api="/api/v1/agents/default/config/acp/"' in content


def test_unknown_agent_page_is_404(staff: Any) -> None:
    assert logged_in(staff).get("/settings/agents/nope").status_code == 404


def test_chat_page_renders_own_session(alice: Any) -> None:
    session = factories.session(alice, title="Alice's plan")

    response = logged_in(alice).get(f"/chat/{session.id}")

    assert response.status_code == 200
    content = response.content.decode()
    assert f'data-session-id="{session.id}"' in content
    assert "Alice&#x27;s plan" in content
    assert '<dialog id="confirm"' in content


def test_chat_page_of_another_users_session_is_404(alice: Any, bob: Any) -> None:
    session = factories.session(alice)

    assert logged_in(bob).get(f"/chat/{session.id}").status_code == 404
    assert logged_in(bob).get("/chat/no-such-session").status_code == 404


def test_session_list_shows_only_own_sessions_newest_first(alice: Any, bob: Any) -> None:
    factories.session(alice, title="first of alice")
    factories.session(alice, title="second of alice")
    factories.session(bob, title="bob's secret")

    content = logged_in(alice).get("/").content.decode()

    assert "bob&#x27;s secret" not in content
    assert content.index("second of alice") < content.index("first of alice")


def test_keys_page_lists_only_own_active_keys(alice: Any, bob: Any) -> None:
    api_key_create(user=alice, name="alice-laptop")
    revoked, _ = api_key_create(user=alice, name="alice-old")
    from accounts.services import api_key_revoke

    api_key_revoke(key=revoked)
    api_key_create(user=bob, name="bob-server")

    content = logged_in(alice).get("/settings/keys").content.decode()

    assert "alice-laptop" in content
    assert "alice-old" not in content
    assert "bob-server" not in content


def test_keys_page_shows_when_a_key_expires(alice: Any) -> None:
    import datetime as dt

    from django.utils import timezone

    api_key_create(user=alice, name="forever")
    api_key_create(user=alice, name="for-a-year", expires_at=timezone.now() + dt.timedelta(days=365))
    old, _ = api_key_create(user=alice, name="bygone", expires_at=timezone.now() + dt.timedelta(days=1))
    old.expires_at = timezone.now() - dt.timedelta(days=1)
    old.save()

    content = logged_in(alice).get("/settings/keys").content.decode()
    rows = {
        name: content[content.index(name) :].split("</tr>")[0] for name in ("forever", "for-a-year", "bygone")
    }

    assert "never" in rows["forever"]
    assert (timezone.now() + dt.timedelta(days=365)).strftime("%Y-%m-%d") in rows["for-a-year"]
    assert "expired" in rows["bygone"]


def test_inbox_page_and_badge_show_only_own_unread_items(alice: Any, bob: Any) -> None:
    for owner, title in ((alice, "alice report"), (bob, "bob report")):
        inbox_item_create(
            owner_id=owner.pk,
            source_type="cron",
            source_id="j",
            title=title,
            body="",
            status="success",
            severity="info",
            payload={},
        )

    content = logged_in(alice).get("/inbox").content.decode()

    assert "alice report" in content
    assert "bob report" not in content
    assert '<span class="n">1</span>' in content


def test_cron_job_page_of_another_user_is_404(alice: Any, bob: Any) -> None:
    assert logged_in(bob).get("/jobs/not-a-job").status_code == 404


def test_cron_preview_explains_a_schedule_in_words_with_next_runs(alice: Any) -> None:
    response = logged_in(alice).get(
        "/jobs/preview", {"type": "cron", "cron": "0 8 * * 1-5", "timezone": "UTC"}
    )

    data = response.json()
    assert data["ok"] is True
    assert "08:00" in data["description"]
    assert len(data["next"]) == 5


def test_cron_preview_reports_a_bad_expression(alice: Any) -> None:
    data = logged_in(alice).get("/jobs/preview", {"type": "cron", "cron": "61 * * * *"}).json()

    assert data["ok"] is False
    assert data["error"]


# --- refusals in the log and the 404 page (issue 31 item 6) -----------------------------------------


def test_a_refused_page_or_request_is_one_line_in_the_log_never_a_traceback(
    alice: Any, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    _, secret = api_key_create(user=alice, name="k")
    with caplog.at_level(logging.INFO):
        assert logged_in(alice).get("/settings/agents").status_code == 403  # PermissionDenied in a page
        assert logged_in(alice).get("/settings/agents/nope").status_code in (403, 404)
        assert logged_in(alice).get("/chat/no-such-session").status_code == 404
        keys = client.post("/api/v1/auth/keys", {"name": "x"}, HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert keys.status_code == 403  # a key cannot create keys
        assert client.get("/api/v1/chat/sessions").status_code == 401

    refusals = [r for r in caplog.records if r.name.startswith("django.")]
    assert len(refusals) == 5, [r.getMessage() for r in refusals]
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in refusals)
    assert "Traceback" not in caplog.text
    assert "Forbidden (Permission denied): /settings/agents" in caplog.text


def test_a_server_error_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "boom", (), None)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record.exc_info = sys.exc_info()
    record.status_code = 500
    logging.getLogger("django.request").handle(record)
    assert record.exc_info is not None


@pytest.mark.parametrize("debug", [True, False])
def test_another_users_chat_shows_the_portals_404_page_in_development_too(
    alice: Any, bob: Any, settings: Any, debug: bool
) -> None:
    settings.DEBUG = debug
    session = factories.session(alice)

    for path in (f"/chat/{session.id}", "/settings/agents/nope", "/chat/new?agent=ghost"):
        client = logged_in(bob)
        if path.startswith("/settings"):
            bob.is_staff = True
            bob.save(update_fields=["is_staff"])
        response = client.get(path)
        assert response.status_code == 404
        assert [t.name for t in response.templates][:1] == ["404.html"], path
        content = response.content.decode()
        assert "There is nothing here." in content
        assert "URLconf" not in content and "urlpatterns" not in content
