"""What the audit trail records (docs/protocol.md §6.4), each event driven through its real path: the login
pages, REST, the admin and the management commands. What a chat turn does (approvals, commands, runner
starts) is in tests/chat/test_audit_turns.py.

Also: secrets never reach an entry, and an entry commits with its change or not at all.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from acp.models import AcpRunner
from agents.models import Agent, Provider, ToolSetting
from agents.services import default_agent_ensure
from audit.models import AuditEntry
from chat.models import Session
from cron.models import CronJob
from cron.scheduler import Scheduler
from tests import factories
from tests.cron.test_api import JOBS, agent_job

pytestmark = pytest.mark.services_rerun

PASSWORD = "pw-for-tests-123"
PROVIDER_KEY = "sk-canary-provider-7d1f0c"
RUNNER_SECRET = "canary-runner-env-91b2e4"


def entries(action: str | None = None, **filters: Any) -> list[AuditEntry]:
    rows = AuditEntry.objects.order_by("created_at", "id")
    if action is not None:
        rows = rows.filter(action=action)
    return list(rows.filter(**filters))


def only(action: str, **filters: Any) -> AuditEntry:
    found = entries(action, **filters)
    assert len(found) == 1, [(e.action, e.summary) for e in entries()]
    return found[0]


@pytest.fixture(autouse=True)
def empty_trail(db: Any) -> None:
    """Each test starts from an empty trail (fixtures' own writes are audited too) and the default agent
    (a transactional test before it may have flushed the table that holds it)."""
    default_agent_ensure()
    AuditEntry.objects.all().delete()


def clear() -> None:
    AuditEntry.objects.all().delete()


# --- logins ---------------------------------------------------------------------------------------------


def test_portal_login_failed_login_and_logout(client: Client, alice: Any) -> None:
    clear()
    refused = client.post("/login/", {"username": "alice", "password": "wrong"})
    assert refused.status_code == 200
    failed = only("auth.login_failed")
    assert failed.user_id is None and failed.address == "127.0.0.1"
    assert failed.object_type == "user" and failed.object_id == str(alice.pk)
    assert failed.details["username"] == "alice" and "wrong" not in json.dumps(failed.details)

    client.post("/login/", {"username": "mallory", "password": "x"})
    unknown = entries("auth.login_failed")[-1]
    assert unknown.details["username"] == "mallory" and unknown.object_id == ""

    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    login = only("auth.login")
    assert (login.user_id, login.username, login.address) == (alice.pk, "alice", "127.0.0.1")
    assert login.details["path"] == "/login/"

    assert client.post("/logout/").status_code == 302
    logout = only("auth.logout")
    assert (logout.user_id, logout.address) == (alice.pk, "127.0.0.1")


def test_a_failed_admin_login_is_recorded_with_its_address(client: Client, staff: Any) -> None:
    clear()
    client.post("/admin/login/", {"username": "charlie", "password": "nope"}, REMOTE_ADDR="203.0.113.9")
    failed = only("auth.login_failed")
    assert failed.address == "203.0.113.9" and failed.details["path"] == "/admin/login/"


def test_a_login_refused_by_the_lockout_is_recorded_as_such(
    client: Client, alice: Any, settings: Any
) -> None:
    settings.AGENTSITE_RATE_LOGIN = "3/15min"
    clear()
    for _ in range(3):
        client.post("/login/", {"username": "alice", "password": "wrong"}, REMOTE_ADDR="192.0.2.7")
    locked = client.post("/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="192.0.2.7")
    assert locked.status_code == 429
    failures = entries("auth.login_failed")
    assert [e.details["locked_out"] for e in failures] == [False, False, False, True]
    assert entries("auth.login") == [], "the right password, refused unchecked, is no login"


def test_behind_a_trusted_proxy_the_address_is_the_client_s(
    client: Client, alice: Any, settings: Any
) -> None:
    import ipaddress

    settings.AGENTSITE_TRUSTED_PROXIES = [ipaddress.ip_network("10.0.0.0/8")]
    clear()
    forwarded = {"REMOTE_ADDR": "10.1.2.3", "HTTP_X_FORWARDED_FOR": "198.51.100.4, 10.9.9.9"}
    client.post("/login/", {"username": "alice", "password": PASSWORD}, **forwarded)
    assert only("auth.login").address == "198.51.100.4"
    spoofed = {"REMOTE_ADDR": "203.0.113.5", "HTTP_X_FORWARDED_FOR": "198.51.100.4"}
    Client().post("/login/", {"username": "alice", "password": "wrong"}, **spoofed)
    assert only("auth.login_failed").address == "203.0.113.5", "a client's own header is not believed"


def test_setup_records_the_first_account_and_its_login(client: Client, db: Any) -> None:
    get_user_model().objects.all().delete()
    clear()
    response = client.post(
        "/setup/",
        {
            "username": "root",
            "email": "",
            "password": "a-long-pass-phrase-42",
            "password_again": "a-long-pass-phrase-42",
        },
    )
    assert response.status_code == 302, response.content
    created = only("config.create", object_type="user")
    assert created.details["after"]["username"] == "root" and created.details["after"]["is_superuser"] is True
    assert created.details["after"]["password"] == "***", "never the hash"
    assert created.user_id is None and created.address == "127.0.0.1", "nobody was signed in yet"
    assert only("auth.login").username == "root"


# --- API keys -------------------------------------------------------------------------------------------


def test_key_creation_and_revocation_over_rest(client: Client, api: Any, alice: Any, alice_key: str) -> None:
    clear()
    client.force_login(alice)  # keys are made by a logged-in browser session, never by a key (§6.2)
    created = api(None).post("/api/v1/auth/keys", {"name": "laptop"}).json()
    entry = only("key.create")
    assert (entry.user_id, entry.address, entry.object_type) == (alice.pk, "127.0.0.1", "api_key")
    assert entry.object_id == created["id"] and entry.details["name"] == "laptop"
    assert entry.details["prefix"] == created["prefix"]
    assert created["key"] not in json.dumps(entry.details) + entry.summary, "the secret is never recorded"

    assert api(alice_key).delete(f"/api/v1/auth/keys/{created['id']}").status_code == 200
    revoked = only("key.revoke")
    assert revoked.user_id == alice.pk and revoked.object_id == created["id"]
    api(alice_key).delete(f"/api/v1/auth/keys/{created['id']}")
    assert len(entries("key.revoke")) == 1, "revoking a revoked key changes nothing"


def test_key_creation_by_the_command_and_revocation_in_the_admin(client: Client, alice: Any) -> None:
    clear()
    call_command("create_api_key", user="alice", name="ci", stdout=io.StringIO())
    by_command = only("key.create")
    assert by_command.user_id is None and by_command.details["owner"]["username"] == "alice"

    root = get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    client.force_login(root)
    client.post(
        reverse("admin:accounts_apikey_changelist"),
        {"action": "revoke", "_selected_action": [by_command.object_id]},
    )
    revoked = only("key.revoke")
    assert revoked.username == "root" and revoked.object_id == by_command.object_id


# --- site configuration ---------------------------------------------------------------------------------


def test_agent_and_tool_writes_record_who_and_what_changed(api: Any, staff: Any, staff_key: str) -> None:
    clear()
    staff_api = api(staff_key)
    assert staff_api.post("/api/v1/agents", {"name": "helper", "model": "m1"}).status_code == 201
    created = only("config.create", object_type="agent")
    assert (created.object_id, created.username, created.address) == ("helper", "charlie", "127.0.0.1")
    assert created.details["after"]["model"] == "m1" and "updated_at" not in created.details["after"]

    staff_api.patch("/api/v1/agents/helper", {"model": "m2", "description": "d"})
    changed = only("config.update", object_type="agent")
    assert changed.details == {
        "changed": ["description", "model"],
        "before": {"description": "", "model": "m1"},
        "after": {"description": "d", "model": "m2"},
    }
    assert changed.summary == "agent 'helper' changed: description, model"
    staff_api.patch("/api/v1/agents/helper", {"model": "m2"})
    assert len(entries("config.update")) == 1, "a write that changes nothing is not an event"

    staff_api.put("/api/v1/agents/helper/tools/shell", {"enabled": False})
    staff_api.put("/api/v1/agents/helper/tools/shell", {"enabled": False})
    staff_api.patch("/api/v1/agents/helper/tools/shell/toggle")
    switches = entries(object_type="tool_setting")
    assert [(e.action, e.object_id) for e in switches] == [
        ("config.create", "helper/shell"),
        ("config.update", "helper/shell"),
    ]
    assert switches[1].details["after"] == {"enabled": True}

    assert staff_api.delete("/api/v1/agents/helper").status_code == 204
    deleted = [(e.object_type, e.object_id) for e in entries("config.delete")]
    assert deleted == [("tool_setting", "helper/shell"), ("agent", "helper")], "cascades are recorded too"


def test_provider_writes_mask_the_key_and_record_that_it_changed(api: Any, staff_key: str) -> None:
    clear()
    staff_api = api(staff_key)
    body = {"id": "acme", "name": "Acme", "base_url": "http://127.0.0.1:9/v1", "api_key": PROVIDER_KEY}
    assert staff_api.post("/api/v1/providers", {**body, "models": ["a"]}).status_code == 201
    assert only("config.create", object_type="provider").details["after"]["api_key"] == "***"

    staff_api.patch("/api/v1/providers/acme", {"api_key": PROVIDER_KEY + "-rotated"})
    rotated = only("config.update", object_type="provider")
    assert rotated.details == {
        "changed": ["api_key"],
        "before": {"api_key": "***"},
        "after": {"api_key": "***"},
    }

    staff_api.put("/api/v1/providers/active", {"provider_id": "acme", "model": "a"})
    site = entries(object_type="site_default")[-1]
    assert site.details["after"]["provider"] == "acme" and site.details["after"]["model"] == "a"

    staff_api.patch("/api/v1/providers/acme", {"api_key": ""})
    cleared = entries("config.update", object_type="provider")[-1]
    assert cleared.details["after"] == {"api_key": ""}, "that no key is set is no secret"
    assert staff_api.delete("/api/v1/providers/acme").status_code == 204
    assert only("config.delete", object_type="provider").object_id == "acme"


def test_runner_writes_keep_env_names_and_mask_their_values(api: Any, staff_key: str) -> None:
    clear()
    staff_api = api(staff_key)
    runner = {"enabled": True, "command": "goose", "args": ["acp"], "env": {"TOKEN": RUNNER_SECRET}}
    assert staff_api.put("/api/v1/agents/default/config/acp/goose", runner).status_code == 200
    created = only("config.create", object_type="acp_runner")
    assert created.object_id == "default/goose" and created.details["after"]["env"] == {"TOKEN": "***"}

    staff_api.put("/api/v1/agents/default/config/acp/goose", {**runner, "env": {"TOKEN": "***"}})
    assert entries("config.update") == [], "the mask keeps the stored value: nothing changed"
    staff_api.put("/api/v1/agents/default/config/acp/goose", {**runner, "env": {"TOKEN": "new", "X": "1"}})
    changed = only("config.update", object_type="acp_runner")
    assert changed.details["before"] == {"env": {"TOKEN": "***"}}
    assert changed.details["after"] == {"env": {"TOKEN": "***", "X": "***"}}
    assert staff_api.delete("/api/v1/agents/default/config/acp/goose").status_code == 204
    assert only("config.delete", object_type="acp_runner").details["before"]["command"] == "goose"


def test_admin_changes_to_an_account_name_the_admin_and_the_permission(client: Client, alice: Any) -> None:
    root = get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    client.force_login(root)
    clear()
    permission = Permission.objects.get(codename="run_unsandboxed")
    response = client.post(
        reverse("admin:auth_user_change", args=[alice.pk]),
        {
            "username": "alice",
            "is_active": "on",
            "is_staff": "on",
            "user_permissions": [permission.pk],
            "date_joined_0": "2026-01-02",
            "date_joined_1": "03:04:05",
            "initial-date_joined_0": "2026-01-02",
            "initial-date_joined_1": "03:04:05",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    changes = {e.details["changed"][0]: e for e in entries("config.update", object_type="user")}
    assert changes["is_staff"].details["after"]["is_staff"] is True
    granted = changes["user_permissions"]
    assert granted.details["after"] == {"user_permissions": ["agents.run_unsandboxed"]}
    assert granted.details["before"] == {"user_permissions": []}
    assert granted.username == "root" and granted.object_id == str(alice.pk)
    assert all("password" not in e.details.get("changed", []) for e in entries()), "untouched"


def test_secrets_never_reach_the_trail(api: Any, staff_key: str, client: Client) -> None:
    """A provider key, a runner's env value and a password, written every way, are nowhere in the table."""
    staff_api = api(staff_key)
    staff_api.post(
        "/api/v1/providers",
        {"id": "acme", "name": "Acme", "base_url": "http://127.0.0.1:9/v1", "api_key": PROVIDER_KEY},
    )
    staff_api.patch("/api/v1/providers/acme", {"api_key": PROVIDER_KEY + "-2"})
    staff_api.put(
        "/api/v1/agents/default/config/acp/goose",
        {"enabled": True, "command": "goose", "env": {"TOKEN": RUNNER_SECRET}},
    )
    staff_api.delete("/api/v1/agents/default/config/acp/goose")
    staff_api.delete("/api/v1/providers/acme")
    user = factories.user("dave", password="canary-password-55e1")
    user.set_password("canary-password-66f2")
    user.save()
    client.post("/login/", {"username": "dave", "password": "canary-password-wrong"})
    user.delete()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {AuditEntry._meta.db_table}")
        dump = repr(cursor.fetchall())
    assert len(entries()) >= 8
    for secret in (PROVIDER_KEY, RUNNER_SECRET, "canary-password", "md5$", "pbkdf2"):
        assert secret not in dump, secret


# --- chats and cron jobs --------------------------------------------------------------------------------


def test_deleting_a_chat_is_recorded_once_per_change(api: Any, alice: Any, alice_key: str) -> None:
    session = factories.session(alice, title="Plans")
    clear()
    assert api(alice_key).delete(f"/api/v1/chat/sessions/{session.id}").status_code == 200
    deleted = only("session.delete")
    assert (deleted.user_id, deleted.object_type, deleted.object_id) == (alice.pk, "session", session.id)
    assert deleted.details["closed"] is True and deleted.details["hidden"] is False
    api(alice_key).delete(f"/api/v1/chat/sessions/{session.id}")
    assert len(entries("session.delete")) == 1, "deleting a closed chat again changes nothing"
    api(alice_key).delete(f"/api/v1/chat/sessions/{session.id}?hide=true")
    hidden = entries("session.delete")[-1]
    assert hidden.details["closed"] is False and hidden.details["hidden"] is True


def test_cron_job_writes_and_runs(api: Any, alice: Any, alice_key: str) -> None:
    clear()
    alice_api = api(alice_key)
    job = alice_api.post(JOBS, agent_job("digest")).json()
    created = only("cron.job_create")
    assert (created.user_id, created.object_type, created.object_id) == (alice.pk, "cron_job", job["id"])
    assert created.details["schedule"]["cron"] == "0 0 1 1 *"

    alice_api.patch(f"{JOBS}/{job['id']}", {"name": "daily digest"})
    alice_api.post(f"{JOBS}/{job['id']}/pause")
    alice_api.post(f"{JOBS}/{job['id']}/resume")
    updates = entries("cron.job_update")
    assert [e.details["changed"] for e in updates] == [["name"], ["enabled"], ["enabled"]]
    assert [e.summary.rsplit(" ", 1)[-1] for e in updates[1:]] == ["paused", "resumed"]

    # A run on schedule is the system's; one asked for is the asker's (here: skipped, one still runs).
    stored = CronJob.objects.get(id=job["id"])
    CronJob.objects.filter(id=stored.id).update(next_run_at=timezone.now())
    Scheduler().claim_due(timezone.now())
    alice_api.post(f"{JOBS}/{job['id']}/run")
    scheduled, manual = entries("cron.run")
    assert scheduled.user_id is None and scheduled.details["trigger"] == "schedule"
    assert scheduled.details["status"] == "running" and scheduled.details["owner"] == str(alice.pk)
    assert manual.user_id == alice.pk and manual.details["status"] == "skipped"

    assert alice_api.delete(f"{JOBS}/{job['id']}").status_code == 200
    assert only("cron.job_delete").details["name"] == "daily digest"


# --- an entry commits with its change, or not at all ----------------------------------------------------


@pytest.fixture
def refuse_inserts_into() -> Iterator[Any]:
    """Install a trigger that makes every INSERT into (or DELETE from) a table fail, as a full disk or a
    broken constraint would; removed afterwards."""
    installed: list[tuple[str, str]] = []

    def refuse(table: str, *, on: str = "INSERT") -> None:
        name = f"refuse_{on.lower()}_{table}"
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                cursor.execute(
                    f"CREATE TRIGGER {name} BEFORE {on} ON {table} BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
            else:
                cursor.execute(
                    "CREATE OR REPLACE FUNCTION refuse_row() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'refused'; END $$"
                )
                cursor.execute(
                    f"CREATE TRIGGER {name} BEFORE {on} ON {table} FOR EACH ROW EXECUTE FUNCTION refuse_row()"
                )
        installed.append((name, table))

    yield refuse
    with connection.cursor() as cursor:
        for name, table in installed:
            cursor.execute(f"DROP TRIGGER {name}" + ("" if connection.vendor == "sqlite" else f" ON {table}"))


@pytest.mark.django_db(transaction=True)
def test_a_change_is_not_kept_without_its_entry(client: Client, staff: Any, refuse_inserts_into: Any) -> None:
    key = factories.api_key(staff)
    client.raise_request_exception = False
    staff_api = factories.JsonClient(client, key)
    client.force_login(staff)  # keys are made by a logged-in browser session, never by a key (§6.2)
    refuse_inserts_into(AuditEntry._meta.db_table)

    assert staff_api.patch("/api/v1/agents/default", {"model": "other"}).status_code == 500
    assert Agent.objects.get(name="default").model == "", "the change went with its entry"
    assert staff_api.put("/api/v1/agents/default/tools/shell", {"enabled": False}).status_code == 500
    assert not ToolSetting.objects.exists()
    assert factories.JsonClient(client, None).post("/api/v1/auth/keys", {"name": "x"}).status_code == 500
    assert staff.api_keys.count() == 1, "no key without its key.create entry"


@pytest.mark.django_db(transaction=True)
def test_a_change_that_rolls_back_leaves_no_entry(
    client: Client, staff: Any, refuse_inserts_into: Any
) -> None:
    key = factories.api_key(staff)
    client.raise_request_exception = False
    staff_api = factories.JsonClient(client, key)
    staff_api.post("/api/v1/agents", {"name": "helper"})
    staff_api.put("/api/v1/agents/helper/tools/shell", {"enabled": False})
    staff_api.put("/api/v1/agents/helper/config/acp/goose", {"enabled": False, "command": "goose"})
    clear()
    # Deleting the agent deletes its switch and runner first (each recorded), then fails on the agent.
    refuse_inserts_into(Agent._meta.db_table, on="DELETE")
    assert staff_api.delete("/api/v1/agents/helper").status_code == 500
    assert ToolSetting.objects.filter(agent_id="helper").exists() and AcpRunner.objects.exists()
    assert entries() == [], "the entries of the rolled-back deletes went with them"

    # A service's own transaction, failing after its change was recorded.
    with pytest.raises(RuntimeError), transaction.atomic():
        Provider.objects.create(id="gone", name="Gone", base_url="http://127.0.0.1:9/v1")
        assert entries("config.create")
        raise RuntimeError("later step failed")
    assert entries() == [] and not Provider.objects.filter(id="gone").exists()


def test_refused_input_changes_nothing_and_records_nothing(api: Any, staff_key: str, alice_key: str) -> None:
    clear()
    staff_api = api(staff_key)
    assert staff_api.patch("/api/v1/agents/default", {"provider": "missing"}).status_code == 400
    bad_env = {"enabled": True, "command": "goose", "env": {"TOKEN": "***"}}
    assert staff_api.put("/api/v1/agents/default/config/acp/goose", bad_env).status_code == 400
    assert api(alice_key).patch("/api/v1/agents/default", {"model": "x"}).status_code == 403
    assert api(alice_key).delete("/api/v1/chat/sessions/missing").status_code == 404
    assert entries() == []
    assert Session.objects.count() == 0
