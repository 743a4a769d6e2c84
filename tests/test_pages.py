"""Portal pages: first-run setup, login/logout, the session list, the chat view, and static files."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from accounts.services import local_user
from chat.models import Session
from tests import factories

PASSWORD = "pw-for-tests-123"
SETUP_FORM = {
    "username": "admin",
    "email": "admin@example.com",
    "password": "a-long-Pass-phrase-42",
    "password_again": "a-long-Pass-phrase-42",
}


# --- setup ----------------------------------------------------------------------------------------


def test_setup_page_is_offered_while_no_account_exists(client: Client, db: Any) -> None:
    response = client.get("/setup/")

    assert response.status_code == 200
    assert b"first account" in response.content


def test_setup_creates_a_superuser_logs_in_and_redirects_home(client: Client, db: Any) -> None:
    response = client.post("/setup/", SETUP_FORM)

    assert response.status_code == 302
    assert response["Location"] == "/"
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.is_staff
    assert admin.check_password("a-long-Pass-phrase-42")
    home = client.get("/")
    assert home.status_code == 200
    assert home.wsgi_request.user == admin


def test_setup_sends_visitors_to_log_in_once_an_account_exists(client: Client, db: Any) -> None:
    client.post("/setup/", SETUP_FORM)
    other = Client()

    gone = other.get("/setup/")
    assert (gone.status_code, gone["Location"]) == (302, "/login/")
    again = other.post("/setup/", {**SETUP_FORM, "username": "intruder"})
    assert (again.status_code, again["Location"]) == (302, "/login/")
    assert not get_user_model().objects.filter(username="intruder").exists()


def test_setup_is_gone_when_an_account_was_made_otherwise(client: Client, alice: Any) -> None:
    response = client.get("/setup/")
    assert (response.status_code, response["Location"]) == (302, "/login/")


def test_setup_ignores_the_open_mode_local_user(client: Client, db: Any) -> None:
    local_user()
    assert client.get("/setup/").status_code == 200


@pytest.mark.parametrize(
    "changes",
    [{"password_again": "something-else-42"}, {"password": "123", "password_again": "123"}, {"username": ""}],
)
def test_setup_with_bad_input_shows_errors_and_creates_nobody(
    client: Client, db: Any, changes: dict[str, str]
) -> None:
    response = client.post("/setup/", {**SETUP_FORM, **changes})

    assert response.status_code == 200
    assert b'role="alert"' in response.content
    assert not get_user_model().objects.exists()


# --- login / logout -------------------------------------------------------------------------------


def test_login_redirects_to_setup_while_no_account_exists(client: Client, db: Any) -> None:
    response = client.get("/login/")

    assert response.status_code == 302
    assert response["Location"] == "/setup/"


def test_home_requires_login(client: Client, alice: Any) -> None:
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_login_with_password_reaches_home(client: Client, alice: Any) -> None:
    assert client.get("/login/").status_code == 200

    response = client.post("/login/", {"username": "alice", "password": PASSWORD})

    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_login_with_wrong_password_is_refused(client: Client, alice: Any) -> None:
    response = client.post("/login/", {"username": "alice", "password": "wrong"})

    assert response.status_code == 200
    assert b"didn&#x27;t match" in response.content or b"didn't match" in response.content
    assert client.get("/").status_code == 302


def test_login_follows_next_but_not_off_site(client: Client, alice: Any) -> None:
    inside = client.post(
        "/login/?next=/chat/x", {"username": "alice", "password": PASSWORD, "next": "/chat/x"}
    )
    assert inside["Location"] == "/chat/x"
    client.logout()
    outside = client.post(
        "/login/", {"username": "alice", "password": PASSWORD, "next": "https://evil.example/"}
    )
    assert outside["Location"] == "/"


def test_logout_needs_post_and_ends_the_session(client: Client, alice: Any) -> None:
    client.force_login(alice)

    assert client.get("/logout/").status_code == 405
    response = client.post("/logout/")

    assert response.status_code == 302
    assert response["Location"] == "/login/"
    assert client.get("/").status_code == 302


NEW_PASSWORD = "a-new-Pass-phrase-77"


def test_a_user_changes_their_password_and_stays_logged_in_while_other_logins_end(
    client: Client, alice: Any
) -> None:
    from accounts.credentials import PASSWORD_CHANGED, Credential, credentials_ended

    other = Client()
    other.force_login(alice)
    other_login = Credential.of_session(alice.pk, other.session)
    client.force_login(alice)
    assert 'href="/account/password/"' in client.get("/").content.decode()  # linked from the account menu
    page = client.get("/account/password/")
    assert page.status_code == 200 and "Change your password" in page.content.decode()

    response = client.post(
        "/account/password/",
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )

    assert response.status_code == 302 and response["Location"] == "/account/password/done/"
    assert "Password changed" in client.get(response["Location"]).content.decode()
    this_login = Credential.of_session(alice.pk, client.session)
    ended = credentials_ended([this_login, other_login], now=timezone.now())
    assert ended == {other_login: PASSWORD_CHANGED}  # its sockets close; this browser's stay
    assert client.get("/").status_code == 200  # this browser stays logged in
    assert other.get("/").status_code == 302  # the other login ended
    alice.refresh_from_db()
    assert alice.check_password(NEW_PASSWORD)


@pytest.mark.parametrize(
    ("form", "field"),
    [
        (
            {"old_password": "wrong", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
            "old_password",
        ),
        (
            {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": "different"},
            "new_password2",
        ),
        ({"old_password": PASSWORD, "new_password1": "123", "new_password2": "123"}, "new_password2"),
        ({}, "old_password"),
    ],
)
def test_a_refused_password_change_says_why_and_changes_nothing(
    client: Client, alice: Any, form: dict[str, str], field: str
) -> None:
    client.force_login(alice)

    response = client.post("/account/password/", form)

    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert 'role="alert"' in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD)


def test_the_password_page_needs_a_login(client: Client, alice: Any) -> None:
    response = client.get("/account/password/")

    assert response.status_code == 302 and response["Location"].startswith("/login/")


# --- session list and chat view -------------------------------------------------------------------


def test_home_lists_only_own_sessions(client: Client, alice: Any, bob: Any) -> None:
    factories.session(alice, session_id="alice-chat", title="Alice plans")
    factories.session(bob, session_id="bob-chat", title="Bob secrets")
    client.force_login(alice)

    response = client.get("/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "Alice plans" in page
    assert "Bob secrets" not in page and "bob-chat" not in page
    assert 'value="default"' in page  # the agent picker


def test_new_chat_is_a_draft_that_stores_nothing_until_the_first_message(client: Client, alice: Any) -> None:
    client.force_login(alice)

    response = client.get("/chat/new")

    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-session-id=""' in page and 'data-agent="default"' in page
    assert not Session.objects.exists()  # the browser creates it with the first message


def test_new_chat_with_unknown_agent_is_not_found(client: Client, alice: Any) -> None:
    client.force_login(alice)

    assert client.get("/chat/new?agent=ghost").status_code == 404
    assert not Session.objects.exists()


def test_the_sidebar_leaves_out_archived_and_deleted_chats(client: Client, alice: Any) -> None:
    factories.session(alice, session_id="kept", title="Kept chat")
    factories.session(alice, session_id="old", title="Archived chat")
    factories.session(alice, session_id="gone", title="Deleted chat")
    client.force_login(alice)
    client.patch("/api/v1/chat/sessions/old", '{"archived": true}', content_type="application/json")
    client.delete("/api/v1/chat/sessions/gone?hide=true")

    page = client.get("/").content.decode()

    assert "Kept chat" in page and "Archived chat" not in page and "Deleted chat" not in page


def test_the_favicon_is_served(client: Client, db: Any) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("favicon.svg")
    assert client.get(response["Location"]).status_code == 200


def test_chat_page_shows_own_session(client: Client, alice: Any) -> None:
    factories.session(alice, session_id="mine", title="My chat")
    client.force_login(alice)

    response = client.get("/chat/mine")

    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-session-id="mine"' in page
    assert "My chat" in page
    assert "js/chat/main.js" in page


def test_chat_page_of_another_users_session_is_not_found(client: Client, alice: Any, bob: Any) -> None:
    factories.session(bob, session_id="bobs", title="Bob secrets")
    client.force_login(alice)

    response = client.get("/chat/bobs")

    assert response.status_code == 404
    assert b"Bob secrets" not in response.content
    assert client.get("/chat/missing").status_code == 404


def test_chat_page_requires_login(client: Client, alice: Any) -> None:
    factories.session(alice, session_id="mine")
    response = client.get("/chat/mine")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


# --- static files ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/static/js/chat/main.js", "/static/css/site.css"])
def test_static_files_are_served(client: Client, path: str) -> None:
    response = client.get(path)

    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert len(body) > 100


def test_unknown_static_file_is_not_found(client: Client, db: Any) -> None:
    assert client.get("/static/js/nope.js").status_code == 404


def test_templates_have_no_inline_scripts_event_handlers_or_styles() -> None:
    """A Content-Security-Policy without 'unsafe-inline' must not break the portal (docs/protocol.md §6.5):
    scripts only from static files, no on…= handlers, and no style attributes either."""
    import re
    from pathlib import Path

    offenders = []
    for template in (Path(__file__).resolve().parents[1] / "templates").rglob("*.html"):
        text = template.read_text()
        for pattern in (r"<script(?![^>]*\bsrc=)[^>]*>", r"\son[a-z]+\s*=", r"\sstyle\s*="):
            offenders += [f"{template.name}: {m.group(0)}" for m in re.finditer(pattern, text)]
    assert offenders == []
