"""Site configuration for agents: providers (OpenAI-compatible endpoints), agents, the site default."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from agentsite.isotime import iso
from security.secret_fields import EncryptedTextField

NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
name_validator = RegexValidator(NAME_PATTERN, "Use 1-64 letters, digits, '_' or '-'.")
DEFAULT_AGENT = "default"


class Provider(models.Model):
    """An OpenAI-compatible endpoint. Its API key is stored encrypted and never shown (docs/protocol.md
    §6.3); its base_url must pass the outbound rule (agents/endpoints.py) when saved and when called."""

    id = models.CharField(primary_key=True, max_length=64, validators=[name_validator])
    name = models.CharField(max_length=200)
    base_url = models.URLField(max_length=500)
    api_key = EncryptedTextField(blank=True)
    model_list = models.JSONField(default=list, blank=True)
    default_model = models.CharField(max_length=200, blank=True)
    discovered_models = models.JSONField(
        default=list,
        blank=True,
        help_text="The model ids the endpoint listed at its last successful test "
        "(POST /providers/{id}/test), offered in the model fields; unlike `model_list`, they allow nothing.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "base_url": self.base_url,
            "api_key_set": bool(self.api_key),
            "models": list(self.model_list),
            "default_model": self.default_model or None,
            "discovered_models": list(self.discovered_models),
            "created_at": iso(self.created_at),
        }

    @property
    def known_models(self) -> list[str]:
        """The listed models, then those its last test found: what the portal's model fields offer."""
        return list(dict.fromkeys([*self.model_list, *self.discovered_models]))


class Agent(models.Model):
    name = models.CharField(primary_key=True, max_length=64, validators=[name_validator])
    description = models.TextField(blank=True)
    system_prompt = models.TextField(blank=True)
    provider = models.ForeignKey(Provider, null=True, blank=True, on_delete=models.SET_NULL)
    model = models.CharField(max_length=200, blank=True)
    sandbox_network = models.BooleanField(
        default=False,
        help_text="Processes this agent's tools start (shell commands, ACP runners) may use the network. "
        "Off: no network at all inside the sandbox. A runner that calls its own model API needs it on.",
    )
    allowed_models = models.JSONField(
        default=list,
        blank=True,
        help_text='Models a message may ask for besides the agent\'s own (a list of names; "*": any). '
        "The provider's key is the site's: users cannot point it at other models.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [
            (
                "run_unsandboxed",
                "Can run commands and runners where the server has no sandbox (AGENTSITE_SANDBOX=none)",
            )
        ]

    def __str__(self) -> str:
        return self.name


class SiteDefault(models.Model):
    """The provider and model used by agents that name none (`PUT /providers/active`). One row, pk=1."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    provider = models.ForeignKey(Provider, null=True, blank=True, on_delete=models.SET_NULL)
    model = models.CharField(max_length=200, blank=True)

    class Meta:
        verbose_name = "site default model"
        constraints = [models.CheckConstraint(condition=models.Q(id=1), name="site_default_single_row")]

    def __str__(self) -> str:
        return f"{self.provider_id or 'demo'} / {self.model or '-'}"

    @classmethod
    def load(cls) -> SiteDefault:
        obj, _ = cls.objects.get_or_create(id=1)
        return obj


class ToolSetting(models.Model):
    """A per-agent switch for one tool; tools without a row use their default (docs/protocol.md §2)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tool_settings")
    tool = models.CharField(max_length=64)
    enabled = models.BooleanField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent", "tool"]
        constraints = [models.UniqueConstraint(fields=["agent", "tool"], name="tool_setting_unique")]

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.tool}: {'on' if self.enabled else 'off'}"
