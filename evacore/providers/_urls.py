"""Endpoint URLs from a connection's base URL: the endpoint's path goes before the query,
so a base URL such as `https://host/v1?key=…` keeps its query on every endpoint.

Must not: know a vendor's endpoints (each adapter names its own paths and root rule).
"""

from __future__ import annotations

from collections.abc import Callable


def split_base(base_url: str) -> tuple[str, str]:
    """(the base URL without query, fragment and trailing slash; `?query` or "")."""
    url = base_url.strip().partition("#")[0]
    base, _, query = url.partition("?")
    return base.rstrip("/"), ("?" + query if query else "")


def join_url(base_url: str, path: str, root: Callable[[str], str] = lambda base: base) -> str:
    """`root(base) + path`, then the base URL's query string."""
    base, query = split_base(base_url)
    return root(base) + path + query
