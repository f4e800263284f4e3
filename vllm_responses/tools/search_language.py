"""The SearXNG `language` a user's country asks for: its main language with the country (`de-CH`), from a table
of countries; None for a country not in it."""

from __future__ import annotations

__all__ = ["search_language"]

# ISO 3166-1 alpha-2 -> the ISO 639-1 language most of its web is written in.
_LANGUAGES = {
    "AE": "ar", "AR": "es", "AT": "de", "AU": "en", "BE": "nl", "BG": "bg", "BR": "pt", "CA": "en",
    "CH": "de", "CL": "es", "CN": "zh", "CO": "es", "CZ": "cs", "DE": "de", "DK": "da", "EE": "et",
    "EG": "ar", "ES": "es", "FI": "fi", "FR": "fr", "GB": "en", "GR": "el", "HK": "zh", "HR": "hr",
    "HU": "hu", "ID": "id", "IE": "en", "IL": "he", "IN": "en", "IT": "it", "JP": "ja", "KR": "ko",
    "LT": "lt", "LV": "lv", "MX": "es", "MY": "ms", "NL": "nl", "NO": "nb", "NZ": "en", "PE": "es",
    "PH": "en", "PK": "en", "PL": "pl", "PT": "pt", "RO": "ro", "RS": "sr", "RU": "ru", "SA": "ar",
    "SE": "sv", "SG": "en", "SI": "sl", "SK": "sk", "TH": "th", "TR": "tr", "TW": "zh", "UA": "uk",
    "US": "en", "VN": "vi", "ZA": "en",
}  # fmt: skip


def search_language(country: str | None) -> str | None:
    """SearXNG's `language` for `country` (two letters, upper case): `ll-CC`, or None when not in the table."""
    language = _LANGUAGES.get(country or "")
    return f"{language}-{country}" if language else None
