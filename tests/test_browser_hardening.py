"""Browser hardening (docs/protocol.md §6.5): the security headers on portal, API and static responses,
a Content-Security-Policy without inline scripts, sockets' Origin compared in scheme, host and port, and
the API's schema and docs page behind a login unless AGENTSITE_PUBLIC_API_DOCS. On a real server:
tests/e2e/test_throttle.py; pages working under the policy: tests/browser/."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from accounts.ws_auth import origin_allowed
from tests import factories

ROOT = Path(__file__).resolve().parents[1]


def csp_directives(response: Any) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in (p.strip() for p in policy.split(";")) if part}


def assert_hardened(response: Any) -> None:
    directives = csp_directives(response)
    assert (
        "'unsafe-inline'" not in directives["script-src"] and "'unsafe-eval'" not in directives["script-src"]
    )
    assert "'unsafe-inline'" not in directives.get("style-src", [])
    assert directives["default-src"] == ["'self'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert directives["object-src"] == ["'none'"]
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "camera=()" in response["Permissions-Policy"] and "microphone=()" in response["Permissions-Policy"]


def test_portal_pages_carry_the_security_headers(client: Client, alice: Any) -> None:
    assert_hardened(client.get("/login/"))
    client.force_login(alice)
    assert_hardened(client.get("/"))
    assert_hardened(client.get("/settings/keys"))


def test_api_responses_carry_the_security_headers(client: Client, alice_key: str) -> None:
    auth = {"HTTP_AUTHORIZATION": f"Bearer {alice_key}"}
    assert_hardened(client.get("/api/v1/chat/sessions", **auth))
    assert_hardened(client.get("/api/v1/nowhere", **auth))  # errors too
    assert_hardened(client.get("/api/v1/chat/sessions"))  # 401
    assert_hardened(client.get("/healthz"))


def test_static_files_carry_the_security_headers(client: Client, db: Any) -> None:
    response = client.get("/static/js/portal.js")
    assert response.status_code == 200
    assert_hardened(response)


def test_a_workspace_file_keeps_its_own_sandboxing_policy(client: Client, alice: Any, alice_key: str) -> None:
    session = factories.session(alice)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {alice_key}"}
    path = f"/api/v1/chat/sessions/{session.id}/files/page.html"
    assert (
        client.put(path, data=b"<script>alert(1)</script>", content_type="text/html", **auth).status_code
        == 201
    )

    response = client.get(path, **auth)

    assert response["Content-Security-Policy"].startswith("sandbox")
    assert response["Permissions-Policy"] and response["X-Frame-Options"] == "DENY"


def test_no_template_has_an_inline_script_style_or_event_handler() -> None:
    """Scripts live in static/js, styles in static/css: the policy allows nothing inline."""
    inline_script = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
    handler = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
    offenders = []
    for template in sorted((ROOT / "templates").rglob("*.html")):
        text = template.read_text()
        for pattern in (inline_script, handler, re.compile(r"<style|\sstyle\s*=", re.IGNORECASE)):
            if pattern.search(text):
                offenders.append(f"{template.relative_to(ROOT)}: {pattern.pattern}")
    assert offenders == []


# --- socket origins -------------------------------------------------------------------------------


def ws_scope(host: str = "127.0.0.1:8000", *, scheme: str = "ws", **headers: str) -> dict[str, Any]:
    raw = [(b"host", host.encode())] + [
        (k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()
    ]
    return {"type": "websocket", "scheme": scheme, "headers": raw}


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://127.0.0.1:8000", True),
        ("http://127.0.0.1:8000/", True),
        ("HTTP://127.0.0.1:8000", True),
        ("http://localhost:3000", False),  # what issue 15 found passing for a server on :8000
        ("http://127.0.0.1:3000", False),  # another port
        ("http://127.0.0.1", False),  # no port is port 80
        ("https://127.0.0.1:8000", False),  # another scheme
        ("http://localhost:8000", False),  # another host than the one asked for
        ("http://127.0.0.1.evil.example:8000", False),
        ("null", False),
        ("file://", False),
    ],
)
def test_a_socket_origin_must_be_the_servers_own_in_scheme_host_and_port(
    settings: Any, origin: str, allowed: bool
) -> None:
    settings.AGENTSITE_ALLOWED_ORIGINS = []
    assert origin_allowed(origin, ws_scope("127.0.0.1:8000")) is allowed


def test_the_own_origin_needs_an_allowed_host(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    assert origin_allowed("http://chat.example.com", ws_scope("chat.example.com"))
    assert not origin_allowed("http://evil.example", ws_scope("evil.example"))


def test_a_secure_socket_wants_an_https_origin_also_behind_a_proxy(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    assert origin_allowed("https://chat.example.com", ws_scope("chat.example.com", scheme="wss"))
    assert not origin_allowed("http://chat.example.com", ws_scope("chat.example.com", scheme="wss"))
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    proxied = ws_scope("chat.example.com", x_forwarded_proto="https")
    assert origin_allowed("https://chat.example.com", proxied)
    assert not origin_allowed("http://chat.example.com", proxied)


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("https://app.example.com", True),
        ("https://app.example.com:443", True),  # the default port, written out
        ("http://app.example.com", False),
        ("https://app.example.com:8443", False),
        ("https://other.example.com", False),
        ("http://localhost:3000", True),
        ("http://localhost:3001", False),
        ("https://team.corp.example", True),
        ("https://a.b.corp.example", True),
        ("https://corp.example", True),
        ("https://corp.example:8443", False),
        ("https://evilcorp.example", False),
        ("http://team.corp.example", False),
    ],
)
def test_allowed_origins_match_in_scheme_host_and_port(settings: Any, origin: str, allowed: bool) -> None:
    settings.AGENTSITE_ALLOWED_ORIGINS = [
        "https://app.example.com",
        "http://localhost:3000",
        "https://*.corp.example",
    ]
    assert origin_allowed(origin, ws_scope("127.0.0.1:8000")) is allowed


# --- API docs -------------------------------------------------------------------------------------


def test_the_schema_and_docs_need_a_login_by_default(client: Client, db: Any) -> None:
    schema = client.get("/api/v1/schema/")
    assert schema.status_code == 401
    assert schema.json()["error"]["code"] == "unauthorized"

    docs = client.get("/api/v1/docs/")
    assert docs.status_code == 302
    assert docs["Location"] == "/login/?next=/api/v1/docs/"
    script = client.get("/api/v1/docs/?script=")
    assert script.status_code == 401


def test_the_schema_and_docs_answer_a_key_or_a_session(client: Client, alice: Any, alice_key: str) -> None:
    auth = {"HTTP_AUTHORIZATION": f"Bearer {alice_key}"}
    assert client.get("/api/v1/schema/", **auth).status_code == 200
    assert client.get("/api/v1/schema/", HTTP_AUTHORIZATION="Bearer ask_wrong").status_code == 401
    client.force_login(alice)
    assert b"openapi" in client.get("/api/v1/schema/").content
    docs = client.get("/api/v1/docs/")
    assert docs.status_code == 200
    page = docs.content.decode()
    assert "<style" not in page and not re.search(r"<script(?![^>]*\bsrc=)", page)
    script = client.get("/api/v1/docs/?script=")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()


def test_public_api_docs_when_configured(client: Client, settings: Any, db: Any) -> None:
    settings.AGENTSITE_PUBLIC_API_DOCS = True
    assert client.get("/api/v1/schema/").status_code == 200
    assert client.get("/api/v1/docs/").status_code == 200
    assert client.get("/api/v1/docs/?script=").status_code == 200
