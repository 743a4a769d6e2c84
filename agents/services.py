"""Writes and lookups for agents and providers, and which model a turn uses."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connection, transaction

from agents.endpoints import provider_policy
from agents.models import DEFAULT_AGENT, Agent, Provider, SiteDefault
from agentsite.db import table

if TYPE_CHECKING:
    from agents.tools.base import Tool

logger = logging.getLogger(__name__)

ENV_PROVIDER_ID = "env"


@dataclass(frozen=True)
class ModelChoice:
    """What a turn talks to: a provider endpoint and model, or the built-in demo model (provider None)."""

    provider_id: str | None
    provider_name: str
    base_url: str
    api_key: str
    model: str

    @property
    def is_demo(self) -> bool:
        return self.provider_id is None


DEMO = ModelChoice(provider_id=None, provider_name="demo", base_url="", api_key="", model="demo")


def agent_get(*, name: str) -> Agent | None:
    return Agent.objects.select_related("provider").filter(name=name).first()


def _choice(provider: Provider, model: str) -> ModelChoice:
    return ModelChoice(
        provider_id=provider.id,
        provider_name=provider.name,
        base_url=provider.base_url,
        api_key=provider.api_key,
        model=model or provider.default_model or (provider.model_list[0] if provider.model_list else ""),
    )


def models_allowed(*, agent: Agent | None, choice: ModelChoice) -> list[str]:
    """The models a message to this agent may ask for (docs/protocol.md §6.4), its own first: the agent's
    `allowed_models` when staff listed any, else its provider's model list ("*": any model)."""
    listed = list(agent.allowed_models) if agent is not None and agent.allowed_models else []
    if not listed and choice.provider_id is not None:
        provider = Provider.objects.filter(id=choice.provider_id).first()
        listed = list(provider.model_list) if provider is not None else []
    return [choice.model, *(name for name in listed if name != choice.model)]


def model_choice_for(*, agent: Agent | None, override: str | None = None) -> ModelChoice:
    """Resolve the agent's provider/model, else the site default, else the demo model."""
    if agent is not None and agent.provider is not None:
        choice = _choice(agent.provider, agent.model)
    else:
        site = SiteDefault.objects.select_related("provider").filter(id=1).first()
        if site is not None and site.provider is not None:
            choice = _choice(site.provider, (agent.model if agent else "") or site.model)
        else:
            return DEMO
    if override:
        choice = ModelChoice(**{**choice.__dict__, "model": override})
    return choice


@transaction.atomic
def provider_register_from_env() -> Provider | None:
    """OPENAI_BASE_URL / OPENAI_API_KEY / AGENTSITE_DEFAULT_MODEL register a provider at start-up.

    It becomes the site default unless an operator already chose one. The key is stored encrypted like
    any provider's (the model field does it); a base URL the outbound rule refuses is logged and skipped.
    """
    if not (settings.OPENAI_BASE_URL or settings.OPENAI_API_KEY):
        return None
    base_url = settings.OPENAI_BASE_URL or "https://api.openai.com/v1"
    refusal = provider_policy(label="OPENAI_BASE_URL").url_refusal(base_url)
    if refusal is not None:
        logger.warning("no provider registered from the environment: %s", refusal)
        return None
    model = settings.AGENTSITE_DEFAULT_MODEL or "gpt-4o-mini"
    provider, _ = Provider.objects.update_or_create(
        id=ENV_PROVIDER_ID,
        defaults={
            "name": "From environment",
            "base_url": base_url,
            "api_key": settings.OPENAI_API_KEY,
            "default_model": model,
            "model_list": [model],
        },
    )
    site_default_adopt(provider=provider)
    return provider


def site_default_adopt(*, provider: Provider) -> bool:
    """The first provider becomes the site default (docs/protocol.md §2 extension): with none chosen yet,
    chats would keep using the demo model although a real one was just configured. Called by every writer
    that adds a provider (REST, admin, the environment), in its transaction; an operator's choice stays."""
    site = SiteDefault.load()
    if site.provider_id is not None:
        return False
    site.provider = provider
    site.model = provider.default_model or (provider.model_list[0] if provider.model_list else "")
    site.save()
    return True


def provider_models_found(*, provider: Provider, models: list[str]) -> None:
    """Keep the model ids a successful test listed (offered in the portal's model fields). An UPDATE of
    that column only: what an endpoint says is no configuration change to audit."""
    Provider.objects.filter(id=provider.id).update(discovered_models=list(models))


def agent_exists(*, name: str) -> bool:
    """SQL, not the ORM (agentsite/db.py): every new chat asks."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {table(Agent)} WHERE name = %s", [name])
        return cursor.fetchone() is not None


def default_agent_ensure() -> Agent:
    agent, _ = Agent.objects.get_or_create(
        name=DEFAULT_AGENT, defaults={"description": "General-purpose assistant."}
    )
    return agent


def tool_items_for(*, agent: Agent) -> list[dict[str, object]]:
    """`GET /agents/{name}/tools`: every tool of the agent (registered ones and those of its MCP servers)
    with this agent's switch."""
    from agents.models import ToolSetting
    from agents.tools import registry

    switches = dict(ToolSetting.objects.filter(agent=agent).values_list("tool", "enabled"))
    return [
        tool_item(tool=tool, enabled=switches.get(tool.name, tool.default_enabled))
        for tool in registry.for_agent(agent.name).tools
    ]


def tool_item(*, tool: Tool, enabled: bool) -> dict[str, object]:
    return {
        "name": tool.name,
        "description": tool.description,
        "enabled": enabled,
        "risk": tool.risk,
        "parameters": tool.parameters(),
    }


@transaction.atomic
def tool_set_enabled(*, agent: Agent, tool_name: str, enabled: bool | None) -> dict[str, object]:
    """Set (or, with enabled=None, flip) one tool's switch for an agent. LookupError for an unknown tool."""
    from agents.models import ToolSetting
    from agents.tools import registry

    tool = registry.lookup(tool_name, agent_name=agent.name)
    if tool is None:
        raise LookupError(tool_name)
    setting = ToolSetting.objects.select_for_update().filter(agent=agent, tool=tool_name).first()
    current = setting.enabled if setting is not None else tool.default_enabled
    target = (not current) if enabled is None else enabled
    ToolSetting.objects.update_or_create(agent=agent, tool=tool_name, defaults={"enabled": target})
    return tool_item(tool=tool, enabled=target)
