"""Settings pages: API keys (every user); agents, tool switches, MCP servers, ACP runners and providers
(staff)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.models import ApiKey
from acp.services import runner_list
from acp.updates import TOOL_PARSE_MODES
from agents.models import Agent, Provider, SiteDefault
from agents.services import tool_items_for
from mcpservers.services import server_list
from portal.access import AuthenticatedHttpRequest, staff_required


@login_required
def keys(request: AuthenticatedHttpRequest) -> HttpResponse:
    own = ApiKey.objects.filter(user=request.user, revoked_at__isnull=True)
    return render(request, "portal/keys.html", {"keys": own, "nav": "keys"})


@staff_required
def agents(request: HttpRequest) -> HttpResponse:
    context = {
        "agents": Agent.objects.order_by("name"),
        "providers": Provider.objects.order_by("name"),
        "nav": "agents",
    }
    return render(request, "portal/agents.html", context)


@staff_required
def agent_detail(request: HttpRequest, name: str) -> HttpResponse:
    agent = Agent.objects.filter(name=name).first()
    if agent is None:
        raise Http404("Agent not found")
    runners = sorted(runner_list(agent=agent).items())
    context = {
        "agent": agent,
        "providers": Provider.objects.order_by("name"),
        "tools": tool_items_for(agent=agent),
        "runners": runners,
        "parse_modes": TOOL_PARSE_MODES,
        "mcp_servers": sorted(server_list(agent=agent).items()),
        "nav": "agents",
    }
    return render(request, "portal/agent_detail.html", context)


@staff_required
def providers(request: HttpRequest) -> HttpResponse:
    site = SiteDefault.objects.filter(id=1).first() or SiteDefault()  # reading writes nothing (nor audits)
    context = {
        "providers": Provider.objects.order_by("name"),
        "active_provider": site.provider_id,
        "active_model": site.model,
        "nav": "providers",
    }
    return render(request, "portal/providers.html", context)
