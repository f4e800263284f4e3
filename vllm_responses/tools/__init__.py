"""The tools a response offers: the code interpreter's containers, function and custom tools, remote MCP tools."""
