"""The agent loop: model call, tool calls, sandbox, model call, until the response ends."""
