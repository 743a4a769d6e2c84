"""The audit trail on a real `manage.py serve` (docs/protocol.md §6.4): under daphne, an entry names the user
that a browser login or an API key authenticated (DRF does so inside the view) and the address the request
came from; staff read the trail over REST."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.support.server import serve, server_env

pytestmark = [pytest.mark.services_rerun, pytest.mark.timeout(120)]

PASSWORD = "a-long-pass-phrase-e2e"


def _post_form(http: httpx.Client, path: str, fields: dict[str, str]) -> httpx.Response:
    page = http.get(path)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None, page.text[:500]
    return http.post(path, data={"csrfmiddlewaretoken": token.group(1), **fields})


def test_entries_name_who_acted_and_from_where_on_a_real_server(tmp_path: Any) -> None:
    with server_env(tmp_path) as env, serve(env) as server:
        with httpx.Client(base_url=server.base_url, timeout=15) as browser:
            first = {"username": "admin", "email": "", "password": PASSWORD, "password_again": PASSWORD}
            assert _post_form(browser, "/setup/", first).status_code == 302
        with httpx.Client(base_url=server.base_url, timeout=15) as stranger:
            refused = _post_form(stranger, "/login/", {"username": "admin", "password": "wrong"})
            anonymous = stranger.get("/api/v1/audit")
        key = env.manage("create_api_key", "--user", "admin").strip()
        with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}) as http:
            assert http.patch("/api/v1/agents/default", json={"model": "m2"}).status_code == 200
            entries = http.get("/api/v1/audit?limit=500").json()["results"]

    assert refused.status_code == 200 and anonymous.status_code == 401
    by_action: dict[str, list[dict[str, Any]]] = {}
    for entry in reversed(entries):
        by_action.setdefault(entry["action"], []).append(entry)
    (account,) = [e for e in by_action["config.create"] if e["object_type"] == "user"]
    assert account["details"]["after"]["password"] == "***" and account["address"] == "127.0.0.1"
    (login,) = by_action["auth.login"]
    assert login["user"]["username"] == "admin" and login["address"] == "127.0.0.1"
    (failed,) = by_action["auth.login_failed"]
    assert failed["user"] is None and failed["address"] == "127.0.0.1"
    assert failed["details"]["username"] == "admin" and failed["object_id"] == login["user"]["id"]
    (created,) = by_action["key.create"]
    assert created["user"] is None, "the command runs as nobody"
    (change,) = [e for e in by_action["config.update"] if e["object_type"] == "agent"]
    assert change["user"]["username"] == "admin" and change["address"] == "127.0.0.1"
    assert change["details"]["after"] == {"model": "m2"}
