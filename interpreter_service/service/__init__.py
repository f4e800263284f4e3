"""The interpreter over HTTP: the shared service's app, its token guard, its records as JSON, its client."""
