"""Showing a URL without the credentials it may carry (``https://user:pw@host/...``, ``?key=...``):
MCP servers' URLs and models' API roots appear in error texts, reprs and logs."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redacted_url(url: str) -> str:
    """``url`` with its credentials masked: user info, query values and fragment become ``***``.

    URLs often carry a password or an API key (``https://user:pw@host/mcp``, ``...?api_key=...``),
    so one is never shown whole. Query keys stay, to tell URLs apart.
    """
    parts = urlsplit(url)
    _, at, host = parts.netloc.rpartition("@")
    query = "&".join(
        f"{item.partition('=')[0]}=***" if "=" in item else "***"
        for item in parts.query.split("&")
        if parts.query
    )
    fragment = "***" if parts.fragment else ""
    return urlunsplit((parts.scheme, f"***@{host}" if at else host, parts.path, query, fragment))
