"""A response's events as it builds them: the builder (pure), its core, MCP steps and citations."""
