"""Reading the audit trail (docs/protocol.md §6.4): `GET /api/v1/audit` for staff only, its filters and pages,
the read-only admin, and the retention the scheduler enforces."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from audit.context import Actor
from audit.models import AuditEntry
from audit.services import audit_record
from cron.scheduler import Scheduler
from tests.test_rest_keys import assert_error

AUDIT = "/api/v1/audit"
pytestmark = pytest.mark.services_rerun


def entry(action: str, *, at: dt.datetime | None = None, user: Any = None, **fields: Any) -> AuditEntry:
    actor = Actor(user_id=user.pk, username=user.username) if user is not None else Actor()
    created = audit_record(action, actor=actor, **fields)
    if at is not None:
        AuditEntry.objects.filter(pk=created.pk).update(created_at=at)
        created.refresh_from_db()
    return created


# --- who may read it ------------------------------------------------------------------------------------


def test_only_staff_may_read_the_audit_trail(
    api: Any, alice_key: str, staff_key: str, client: Client
) -> None:
    assert_error(api(alice_key).get(AUDIT), 403, "forbidden")
    assert_error(client.get(AUDIT), 401, "unauthorized")
    assert api(staff_key).get(AUDIT).status_code == 200


def test_a_staff_browser_session_reads_it_too(client: Client, staff: Any, alice: Any) -> None:
    client.force_login(alice)
    assert_error(client.get(AUDIT), 403, "forbidden")
    client.force_login(staff)
    response = client.get(AUDIT)
    assert response.status_code == 200 and set(response.json()) == {"results", "next"}


# --- the entries, filters and pages ---------------------------------------------------------------------


def test_an_entry_has_the_documented_fields(api: Any, staff_key: str, alice: Any) -> None:
    AuditEntry.objects.all().delete()
    entry(
        "config.update",
        user=alice,
        object_type="agent",
        object_id="default",
        summary="agent 'default' changed: model",
        details={"changed": ["model"], "before": {"model": "a"}, "after": {"model": "b"}},
    )
    (item,) = api(staff_key).get(f"{AUDIT}?action=config.update").json()["results"]
    assert set(item) == {
        "id",
        "created_at",
        "user",
        "address",
        "action",
        "object_type",
        "object_id",
        "summary",
        "details",
    }
    assert item["user"] == {"id": str(alice.pk), "username": "alice"}
    assert item["created_at"].endswith("Z") and isinstance(item["id"], str)
    assert item["object_type"] == "agent" and item["object_id"] == "default"
    assert item["details"]["after"] == {"model": "b"}


def test_filters_by_user_action_and_time(api: Any, staff_key: str, alice: Any, bob: Any) -> None:
    AuditEntry.objects.all().delete()
    now = timezone.now()
    entry("auth.login", user=alice, at=now - dt.timedelta(days=3))
    entry("config.create", user=alice, at=now - dt.timedelta(days=2))
    entry("config.update", user=bob, at=now - dt.timedelta(days=1))
    entry("command.run", user=bob, at=now)
    entry("audit.prune", at=now)

    def actions(query: str) -> list[str]:
        response = api(staff_key).get(f"{AUDIT}?{query}")
        assert response.status_code == 200, response.content
        return [item["action"] for item in response.json()["results"]]

    assert actions("") == ["audit.prune", "command.run", "config.update", "config.create", "auth.login"]
    assert actions("user=alice") == ["config.create", "auth.login"]
    assert actions(f"user={bob.pk}") == ["command.run", "config.update"]
    assert actions("action=config") == ["config.update", "config.create"], "a prefix names a family"
    assert actions("action=config.create,auth.login") == ["config.create", "auth.login"]
    assert actions("action=auth.log") == [], "a prefix matches whole words only"
    since = (now - dt.timedelta(days=2, hours=1)).isoformat().replace("+00:00", "Z")
    until = (now - dt.timedelta(hours=12)).isoformat().replace("+00:00", "Z")
    assert actions(f"since={since}") == ["audit.prune", "command.run", "config.update", "config.create"]
    assert actions(f"since={since}&until={until}") == ["config.update", "config.create"]
    assert actions(f"since={since}&until={until}&user=bob") == ["config.update"]
    assert actions("user=nobody") == []
    assert actions("user=%C2%B2") == [] and actions(f"user={2**64}") == []  # "²" was a 500: isdigit, not int


def test_bad_times_and_limits_are_400(api: Any, staff_key: str) -> None:
    error = assert_error(api(staff_key).get(f"{AUDIT}?since=yesterday"), 400, "invalid")
    assert "since" in error["fields"]
    assert_error(api(staff_key).get(f"{AUDIT}?until=2026-13-45"), 400, "invalid")
    assert_error(api(staff_key).get(f"{AUDIT}?limit=0"), 400, "invalid")
    assert_error(api(staff_key).get(f"{AUDIT}?cursor=junk"), 400, "invalid")
    assert api(staff_key).get(f"{AUDIT}?since=2026-01-02").status_code == 200, "a date is midnight UTC"


def test_pages_follow_the_cursor_newest_first(
    api: Any, staff_key: str, alice: Any, django_assert_max_num_queries: Any
) -> None:
    AuditEntry.objects.all().delete()
    start = timezone.now() - dt.timedelta(hours=1)
    for index in range(7):
        entry("command.run", user=alice, at=start + dt.timedelta(minutes=index), summary=str(index))
    seen: list[str] = []
    url: str | None = f"{AUDIT}?limit=3&action=command.run"
    pages = 0
    while url:
        # The key's lookup, its last-used stamp, one page: never a query per entry.
        with django_assert_max_num_queries(4):
            body = api(staff_key).get(url).json()
        seen += [item["summary"] for item in body["results"]]
        pages += 1
        url = f"{AUDIT}?limit=3&action=command.run&cursor={body['next']}" if body["next"] else None
    assert seen == ["6", "5", "4", "3", "2", "1", "0"] and pages == 3


# --- the admin: read only -------------------------------------------------------------------------------


def test_the_admin_shows_entries_and_changes_none(client: Client, alice: Any) -> None:
    AuditEntry.objects.all().delete()
    shown = entry("config.update", user=alice, summary="agent 'default' changed: model", details={"x": 1})
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-123")
    client.force_login(root)
    changelist = client.get(reverse("admin:audit_auditentry_changelist"))
    assert changelist.status_code == 200 and b"agent &#x27;default&#x27; changed" in changelist.content
    change_url = reverse("admin:audit_auditentry_change", args=[shown.pk])
    page = client.get(change_url)
    assert page.status_code == 200 and b'name="summary"' not in page.content, "shown, not editable"
    assert client.post(change_url, {"summary": "rewritten"}).status_code == 403
    assert client.get(reverse("admin:audit_auditentry_add")).status_code == 403
    delete_url = reverse("admin:audit_auditentry_delete", args=[shown.pk])
    assert client.post(delete_url, {"post": "yes"}).status_code == 403
    bulk = client.post(
        reverse("admin:audit_auditentry_changelist"),
        {"action": "delete_selected", "_selected_action": [shown.pk], "post": "yes"},
    )
    assert bulk.status_code in (200, 302)
    assert AuditEntry.objects.get(pk=shown.pk).summary == "agent 'default' changed: model"


# --- retention ------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@override_settings(AGENTSITE_AUDIT_RETENTION_DAYS=30)
async def test_the_scheduler_prunes_entries_past_the_retention_and_says_so(alice: Any) -> None:
    from asgiref.sync import sync_to_async

    now = timezone.now()

    def seed() -> None:
        AuditEntry.objects.all().delete()
        entry("auth.login", user=alice, at=now - dt.timedelta(days=31), summary="old")
        entry("auth.login", user=alice, at=now - dt.timedelta(days=29), summary="kept")

    await sync_to_async(seed)()
    scheduler = Scheduler(clock=lambda: now)
    assert await scheduler.tick() is False  # no job was due; the housekeeping ran all the same

    def left() -> list[tuple[str, str]]:
        return list(AuditEntry.objects.order_by("created_at").values_list("action", "summary"))

    rows = await sync_to_async(left)()
    assert rows[0] == ("auth.login", "kept")
    assert rows[1][0] == "audit.prune" and rows[1][1].startswith("1 entries older than 30 days")
    prune = await sync_to_async(AuditEntry.objects.get)(action="audit.prune")
    assert prune.user_id is None and prune.details["deleted"] == 1

    await sync_to_async(seed)()
    assert await scheduler.tick() is False
    assert len(await sync_to_async(left)()) == 2, "once an hour, not at every tick"


@override_settings(AGENTSITE_AUDIT_RETENTION_DAYS=0)
def test_a_retention_of_zero_keeps_everything(alice: Any) -> None:
    from audit.services import audit_prune

    entry("auth.login", user=alice, at=timezone.now() - dt.timedelta(days=3650))
    assert audit_prune() == 0
    assert AuditEntry.objects.filter(action="auth.login").exists()


def test_the_retention_setting_is_parsed_strictly() -> None:
    from django.core.exceptions import ImproperlyConfigured

    from agentsite.env import env_int

    assert env_int("AGENTSITE_AUDIT_RETENTION_DAYS", 90, minimum=0, environ={}) == 90
    with pytest.raises(ImproperlyConfigured):
        env_int(
            "AGENTSITE_AUDIT_RETENTION_DAYS", 90, minimum=0, environ={"AGENTSITE_AUDIT_RETENTION_DAYS": "-1"}
        )
