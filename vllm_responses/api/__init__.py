"""The HTTP API: the Starlette app, its routes, middleware, request parameters, WebSocket mode and the playground."""
