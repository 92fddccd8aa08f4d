"""The web page (R10, R14.4): `GET /` answers the page, `/web/…` its static files.

Must not: hold API logic (the page speaks only the HTTP API under `/v1`) or serve anything
outside `static/`. Nothing is built at install time; the files ship inside the package.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"
ASSET_PREFIX = "/web"
_IMPORT_MAP = re.compile(r'<script type="importmap">(.*?)</script>', re.DOTALL)


class _Assets(StaticFiles):
    """Static files that the browser revalidates (ETag) instead of trusting a stale copy."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response


@lru_cache(maxsize=1)
def _page() -> tuple[bytes, str]:
    """The page and its Content-Security-Policy (the inline import map allowed by hash)."""
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(m.encode()).digest()).decode() + "'"
        for m in _IMPORT_MAP.findall(html)
    )
    policy = "; ".join((
        "default-src 'self'",
        f"script-src 'self' {hashes}".strip(),
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ))
    return html.encode(), policy


async def _index(request: Request) -> Response:
    body, policy = _page()
    return Response(body, media_type="text/html; charset=utf-8", headers={
        "Content-Security-Policy": policy,
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    })


def mount_page(app: FastAPI) -> None:
    """Serve the page at `/` and its files at `/web/`; `/v1`, `/metrics` and the OpenAPI
    routes keep their own paths (nothing here is a catch-all)."""
    app.add_api_route("/", _index, methods=["GET"], include_in_schema=False)
    app.mount(ASSET_PREFIX, _Assets(directory=STATIC_DIR), name="web")
