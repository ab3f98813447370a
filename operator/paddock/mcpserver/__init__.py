"""paddock mcp: the sandboxes and runs of Paddock as MCP tools."""
