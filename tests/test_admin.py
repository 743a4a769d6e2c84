"""Django admin smoke test: every registered model's changelist, add and change pages open."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents.models import Agent, Provider, SiteDefault, ToolSetting
from mcpservers.models import McpServer
from tests import factories


def test_every_admin_page_opens_for_a_superuser(client: Client, alice: Any) -> None:
    # One row of everything, so the changelists render rows and change pages exist.
    factories.api_key(alice)
    session = factories.session(alice, session_id="s1", title="Hello")
    session.messages.create(message_id="m1", role="user", content="hi", entered_at=timezone.now())
    provider = Provider.objects.create(id="p", name="P", base_url="http://127.0.0.1:1/v1", api_key="sk-x")
    SiteDefault.objects.update_or_create(id=1, defaults={"provider": provider, "model": "m"})
    ToolSetting.objects.create(agent=Agent.objects.get(name="default"), tool="shell", enabled=False)
    McpServer.objects.create(agent_id="default", name="time", command="mcp-server-time", env={"K": "v"})
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-123")
    client.force_login(root)

    opened = []
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        prefix = f"admin:{meta.app_label}_{meta.model_name}"
        changelist = client.get(reverse(f"{prefix}_changelist"))
        assert changelist.status_code == 200, (meta.label, changelist.status_code)
        searched = client.get(reverse(f"{prefix}_changelist"), {"q": "x"})
        assert searched.status_code == 200, meta.label
        request = changelist.wsgi_request
        if model_admin.has_add_permission(request):
            assert client.get(reverse(f"{prefix}_add")).status_code == 200, meta.label
        first = model._default_manager.first()
        if first is not None:
            change = client.get(reverse(f"{prefix}_change", args=[first.pk]))
            assert change.status_code == 200, meta.label
        opened.append(meta.label)

    assert {
        "accounts.ApiKey",
        "chat.Session",
        "chat.Message",
        "agents.Agent",
        "agents.Provider",
        "agents.SiteDefault",
        "agents.ToolSetting",
        "mcpservers.McpServer",
    } <= set(opened)


def test_provider_admin_never_shows_the_api_key(client: Client, db: Any) -> None:
    Provider.objects.create(id="p", name="P", base_url="http://127.0.0.1:1/v1", api_key="sk-secret-value")
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-123")
    client.force_login(root)

    response = client.get(reverse("admin:agents_provider_change", args=["p"]))

    assert response.status_code == 200
    assert b"sk-secret-value" not in response.content


def test_admin_is_closed_to_non_staff(client: Client, alice: Any) -> None:
    client.force_login(alice)

    response = client.get(reverse("admin:chat_session_changelist"))

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_the_first_provider_added_in_the_admin_becomes_the_site_default(client: Client, db: Any) -> None:
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-123")
    client.force_login(root)
    form = {"name": "Local", "base_url": "http://127.0.0.1:8001/v1", "api_key": "", "model_list": '["m1"]'}

    for provider_id in ("first", "second"):
        response = client.post(reverse("admin:agents_provider_add"), {"id": provider_id, **form})
        assert response.status_code == 302, response.content.decode()[:2000]

    site = SiteDefault.objects.get(id=1)
    assert (site.provider_id, site.model) == ("first", "m1")
