"""The MCP edge of dreamwell: tools, transports and the command line."""
