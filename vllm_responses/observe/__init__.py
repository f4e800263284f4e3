"""Observability: Prometheus metrics, log lines, and one response's meter."""
