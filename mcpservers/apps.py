from __future__ import annotations

from django.apps import AppConfig


class McpServersConfig(AppConfig):
    name = "mcpservers"
    verbose_name = "MCP tool servers"

    def ready(self) -> None:
        """Offer MCP servers' tools to agents (the app adds its tool source to agents' registry), and say
        when a server's configuration or tool list changed, so the next turn reads it again. Servers are
        site configuration, in the audit trail (agents/toolservers/services.py; env and header values masked;
        what was last found out about a server is not a change of it)."""
        from django.db.models.signals import post_delete, post_save

        from agents.signals import tool_config_changed
        from agents.tools import registry
        from agents.toolservers.services import track_writes
        from mcpservers.models import McpServer
        from mcpservers.tools import source

        registry.add_source(source)
        track_writes(
            McpServer,
            object_type="mcp_server",
            also_exclude=("tools", "tools_listed_at", "status", "status_message", "checked_at"),
        )

        def changed(sender: type, instance: McpServer, **_: object) -> None:
            tool_config_changed.send(sender=sender, instance=instance)

        post_save.connect(changed, sender=McpServer, dispatch_uid="mcp-server-saved", weak=False)
        post_delete.connect(changed, sender=McpServer, dispatch_uid="mcp-server-deleted", weak=False)
