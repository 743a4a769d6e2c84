"""MCP tool servers per agent: configs, the SDK client, and their tools in the agents' registry.

The app is not called `mcp`: that is the official SDK's package, which this app uses.
"""
