"""Where an HTTP MCP server's URL may point: the site's one rule for configured URLs (security/outbound.py,
docs/protocol.md §6.3), the same as for providers' `base_url` — checked when the URL is saved and again,
after DNS, on every connection the server's client makes (mcpservers/client.py)."""

from __future__ import annotations

from django.conf import settings

from security.outbound import OutboundPolicy


def mcp_policy(*, label: str = "url") -> OutboundPolicy:
    return OutboundPolicy(deny_private=settings.AGENTSITE_PROVIDER_DENY_PRIVATE, label=label)
