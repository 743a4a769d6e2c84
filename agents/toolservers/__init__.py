"""External tool servers: programs (or endpoints) configured per agent that an agent's tools talk to.

ACP runners (acp/) and MCP servers (mcpservers/) are one idea with two protocols. What they share lives
here, once: the configuration row and its validation (models.py), its reads and writes with secrets kept
write-only and audited (services.py), REST (api.py, serializers.py), the admin form (admin.py), the launch
in the site's sandbox (launch.py), the Test apart from any chat (probe.py) and the per-(chat session,
server) connections of a process with their lifetime (registry.py). Each app keeps only its protocol:
ACP's JSON-RPC client and the delegate tool, MCP's SDK session, tool discovery and HTTP transport
(docs/architecture.md "External tool servers").
"""
