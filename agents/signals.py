"""Signals of the agents' configuration that other apps send or hear.

`tool_config_changed`: a source of per-agent tools (mcpservers) changed what an agent's tools are (a
server saved, deleted, or its tool list found anew). chat's turn setup cache clears itself on it, as it
does for agents' own rows — the app that sends it need not know who listens.
"""

from __future__ import annotations

from django.dispatch import Signal

tool_config_changed = Signal()
