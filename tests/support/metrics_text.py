"""Prometheus text read back with prometheus_client's own parser, for the /metrics tests."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Samples", "parse", "value"]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> tuple[Samples, dict[str, str]]:
    """Every sample by (name, sorted labels), and every family's type, as Prometheus would read them."""
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, types


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value; 0 when absent (a labelled counter not yet incremented)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
