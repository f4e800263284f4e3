"""What a `web_search` tool asks of its searches: `filters.allowed_domains` and `user_location.country`, checked
(a 400 naming the field) and read."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.protocol.inputs import WebSearchTool

__all__ = ["MAX_ALLOWED_DOMAINS", "WEB_SEARCH_TYPES", "SearchOptions", "includes_sources", "search_options"]

WEB_SEARCH_TYPES = (
    "web_search",
    "web_search_2025_08_26",
    "web_search_preview",
    "web_search_preview_2025_03_11",
)
MAX_ALLOWED_DOMAINS = 100  # OpenAI's limit
_DOMAIN = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")
_COUNTRY = re.compile(r"[A-Za-z]{2}")


@dataclass(frozen=True)
class SearchOptions:
    """The domains a search is limited to (none: any), and the user's two-letter country (upper case)."""

    domains: tuple[str, ...] = ()
    country: str | None = None


def search_options(tool: WebSearchTool, param: str) -> SearchOptions:
    """`tool`'s options (`param`: how the request names it, `tools[i]`); an `InvalidRequest` naming the field
    that is not as the SDK types it (a domain is a host name; a scheme and a trailing `/` are dropped)."""
    return SearchOptions(_domains(tool.filters, f"{param}.filters"), _country(tool.user_location, param))


def includes_sources(include: Collection[str]) -> bool:
    """Whether `include` asks for the results' URLs: `web_search_call.action.sources`, or
    `web_search_call.results` (the SDK's item has no field of its own for them)."""
    return "web_search_call.action.sources" in include or "web_search_call.results" in include


def _domains(filters: dict[str, Any] | None, param: str) -> tuple[str, ...]:
    given = (filters or {}).get("allowed_domains")
    if given is None:
        return ()
    if not isinstance(given, list) or len(given) > MAX_ALLOWED_DOMAINS:
        raise InvalidRequest(
            f"{param}.allowed_domains must be a list of at most {MAX_ALLOWED_DOMAINS} domains.",
            param=f"{param}.allowed_domains",
        )
    domains: list[str] = []
    for j, value in enumerate(given):
        domain = _host(value) if isinstance(value, str) else ""
        if not _DOMAIN.fullmatch(domain):
            raise InvalidRequest(
                f"{param}.allowed_domains[{j}] is not a domain name (e.g. 'pubmed.ncbi.nlm.nih.gov').",
                param=f"{param}.allowed_domains[{j}]",
            )
        domains.append(domain)
    return tuple(dict.fromkeys(domains))


def _host(value: str) -> str:
    """A domain as given, lower case, without a scheme or a trailing `/`."""
    domain = value.strip().lower()
    for scheme in ("https://", "http://"):
        domain = domain.removeprefix(scheme)
    return domain.rstrip("/")


def _country(location: dict[str, Any] | None, param: str) -> str | None:
    if location is None:
        return None
    if location.get("type", "approximate") != "approximate":
        raise InvalidRequest(
            f"{param}.user_location.type must be 'approximate'.", param=f"{param}.user_location.type"
        )
    country = location.get("country")
    if country is None:
        return None
    if not isinstance(country, str) or not _COUNTRY.fullmatch(country):
        raise InvalidRequest(
            f"{param}.user_location.country must be a two-letter ISO country code (e.g. 'US').",
            param=f"{param}.user_location.country",
        )
    return country.upper()
