"""MCP server configs over REST (docs/protocol.md §2 "MCP servers"): validation, masking, permissions, secrets
at rest, the admin."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from mcpservers.models import McpServer
from security.encryption import decrypt

pytestmark = [pytest.mark.django_db, pytest.mark.services_rerun]

BASE = "/api/v1/agents/default/config/mcp"
CANARY_ENV = "env-canary-8d21f0"
CANARY_HEADER = "Bearer header-canary-5c77e1"
STDIO = {
    "enabled": True,
    "transport": "stdio",
    "command": "uvx",
    "args": ["mcp-server-time"],
    "env": {"TZ_TOKEN": CANARY_ENV},
    "trusted_tools": ["get_current_time"],
    "trusted": False,
    "timeout_seconds": 30,
    "sandbox_paths": ["/opt/uv"],
}
HTTP = {
    "enabled": True,
    "transport": "http",
    "url": "https://mcp.example.com/mcp",
    "headers": {"Authorization": CANARY_HEADER},
}
UNCHECKED = {"state": "unchecked", "message": None, "checked_at": None, "tools": []}


def raw(column: str, name: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM mcpservers_mcpserver WHERE name = %s", [name])
        value = cursor.fetchone()[0]
    return value if isinstance(value, dict) else json.loads(value)


def test_put_creates_then_replaces_and_everyone_reads_it_with_secrets_masked(api, staff_key, alice_key):
    staff = api(staff_key)
    created = staff.put(f"{BASE}/time", STDIO)
    assert created.status_code == 200, created.json()
    assert created.json() == {
        **STDIO,
        "env": {"TZ_TOKEN": "***"},
        "url": None,
        "headers": {},
        "status": UNCHECKED,
    }
    replaced = staff.put(f"{BASE}/time", {"command": "mcp-server-time"})
    assert replaced.json() == {
        "enabled": False,
        "transport": "stdio",
        "command": "mcp-server-time",
        "args": [],
        "env": {},
        "url": None,
        "headers": {},
        "trusted_tools": [],
        "trusted": False,
        "timeout_seconds": 60,
        "sandbox_paths": [],
        "status": UNCHECKED,
    }, "PUT replaces the whole config: missing fields take their defaults"

    assert staff.put(f"{BASE}/remote", HTTP).status_code == 200
    listed = api(alice_key).get(BASE)
    assert listed.status_code == 200
    assert set(listed.json()["servers"]) == {"time", "remote"}
    remote = listed.json()["servers"]["remote"]
    assert remote["headers"] == {"Authorization": "***"} and remote["url"] == HTTP["url"]
    assert remote["command"] is None
    assert CANARY_HEADER not in json.dumps(listed.json())
    assert api(alice_key).get(f"{BASE}/remote").json() == remote


def test_only_staff_write_and_test_and_unknown_names_are_404(api, staff_key, alice_key):
    assert api(alice_key).put(f"{BASE}/time", STDIO).status_code == 403
    assert api(staff_key).put(f"{BASE}/time", STDIO).status_code == 200
    assert api(alice_key).delete(f"{BASE}/time").status_code == 403
    assert api(alice_key).post(f"{BASE}/time/test", {}).status_code == 403
    assert api(None).get(BASE).status_code == 401
    assert api(alice_key).get(f"{BASE}/nope").status_code == 404
    assert api(staff_key).post(f"{BASE}/nope/test", {}).status_code == 404
    assert api(alice_key).get("/api/v1/agents/ghost/config/mcp").status_code == 404
    bad_name = api(staff_key).put(f"{BASE}/no.dots", STDIO)
    assert bad_name.status_code == 400 and "name" in bad_name.json()["error"]["fields"]
    assert api(staff_key).delete(f"{BASE}/time").status_code == 204
    assert api(staff_key).delete(f"{BASE}/time").status_code == 404


def test_putting_back_what_was_read_keeps_the_stored_secrets(api, staff_key):
    staff = api(staff_key)
    staff.put(f"{BASE}/remote", HTTP)
    shown = staff.get(f"{BASE}/remote").json()
    again = staff.put(f"{BASE}/remote", {**shown, "headers": {**shown["headers"], "X-Extra": "1"}})
    assert again.status_code == 200, again.json()
    assert McpServer.objects.get(name="remote").headers == {"Authorization": CANARY_HEADER, "X-Extra": "1"}
    unknown = staff.put(f"{BASE}/remote", {**HTTP, "headers": {"X-New": "***"}})
    assert unknown.status_code == 400 and "headers" in unknown.json()["error"]["fields"]
    unknown = staff.put(f"{BASE}/remote", {**HTTP, "env": {"NEW": "***"}})
    assert unknown.status_code == 400 and "env" in unknown.json()["error"]["fields"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"enabled": True, "transport": "stdio", "command": ""}, "command"),
        ({"enabled": True, "transport": "stdio", "command": "  "}, "command"),
        ({"enabled": True, "transport": "http"}, "url"),
        ({"transport": "sse"}, "transport"),
        ({"transport": "http", "url": "ftp://example.com/mcp"}, "url"),
        ({"transport": "http", "url": "http://169.254.169.254/latest"}, "url"),
        ({"transport": "http", "url": "http://[fd00:ec2::254]/mcp"}, "url"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"timeout_seconds": "60"}, "timeout_seconds"),
        ({"enabled": "yes"}, "enabled"),
        ({"trusted": 1}, "trusted"),
        ({"args": "--flag"}, "args"),
        ({"args": [1]}, "args"),
        ({"env": {"KEY": 1}}, "env"),
        ({"env": {"A=B": "x"}}, "env"),
        ({"headers": ["Authorization: x"]}, "headers"),
        ({"headers": {"Bad Name": "x"}}, "headers"),
        ({"headers": {"X-Ok": "line\r\nbreak"}}, "headers"),
        ({"trusted_tools": "ping"}, "trusted_tools"),
        ({"sandbox_paths": ["relative"]}, "sandbox_paths"),
        ({"comand": "typo"}, "comand"),
    ],
)
def test_invalid_configs_are_refused_with_the_field_named(api, staff_key, body, field):
    response = api(staff_key).put(f"{BASE}/bad", body)
    assert response.status_code == 400, (body, response.json())
    named = response.json()["error"]["fields"]
    assert any(name == field or name.startswith(f"{field}.") for name in named), response.json()
    assert not McpServer.objects.filter(name="bad").exists()


def test_env_and_headers_are_encrypted_at_rest_names_in_clear(api, staff_key):
    api(staff_key).put(f"{BASE}/time", STDIO)
    api(staff_key).put(f"{BASE}/remote", HTTP)
    env = raw("env", "time")
    headers = raw("headers", "remote")
    assert set(env) == {"TZ_TOKEN"} and set(headers) == {"Authorization"}
    assert CANARY_ENV not in json.dumps(env) and decrypt(env["TZ_TOKEN"]) == CANARY_ENV
    assert CANARY_HEADER not in json.dumps(headers) and decrypt(headers["Authorization"]) == CANARY_HEADER
    assert McpServer.objects.get(name="time").config().env == {"TZ_TOKEN": CANARY_ENV}


def test_rotate_secrets_covers_mcp_servers(settings: Any, api, staff_key) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.AGENTSITE_SECRETS_KEYS = [old]
    api(staff_key).put(f"{BASE}/remote", HTTP)
    settings.AGENTSITE_SECRETS_KEYS = [new, old]
    out = StringIO()
    call_command("rotate_secrets", stdout=out)
    assert "mcpservers.McpServer.headers: 1 re-encrypted" in out.getvalue()
    assert Fernet(new).decrypt(raw("headers", "remote")["Authorization"].encode()).decode() == CANARY_HEADER


def test_a_change_of_how_the_server_is_reached_forgets_its_tools_another_keeps_them(api, staff_key):
    staff = api(staff_key)
    staff.put(f"{BASE}/time", STDIO)
    listed = [{"name": "get_current_time", "description": "Now.", "input_schema": {}, "read_only": True}]
    McpServer.objects.filter(name="time").update(
        tools=listed, tools_listed_at=timezone.now(), status="ok", checked_at=timezone.now()
    )
    shown = staff.get(f"{BASE}/time").json()
    assert shown["status"]["state"] == "ok"
    assert shown["status"]["tools"] == [{"name": "get_current_time", "description": "Now."}]

    kept = staff.put(f"{BASE}/time", {**shown, "trusted_tools": [], "timeout_seconds": 10})
    assert kept.status_code == 200 and kept.json()["status"]["state"] == "ok", "status is read-only, ignored"
    moved = staff.put(f"{BASE}/time", {**shown, "args": ["mcp-server-time", "--local-timezone", "UTC"]})
    assert moved.json()["status"] == UNCHECKED


def test_the_admin_never_shows_secret_values_and_keeps_them_when_saved(client, api, staff_key):
    api(staff_key).put(f"{BASE}/remote", HTTP)
    server = McpServer.objects.get(name="remote")
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-123")
    client.force_login(root)
    page = client.get(reverse("admin:mcpservers_mcpserver_change", args=[server.pk]))
    assert page.status_code == 200 and CANARY_HEADER.encode() not in page.content
    assert client.get(reverse("admin:mcpservers_mcpserver_changelist")).status_code == 200
