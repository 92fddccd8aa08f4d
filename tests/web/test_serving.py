"""Serving the page (R14.4): `/` and `/web/…` come from files inside the package, with a
strict Content-Security-Policy; the API's own paths keep their behaviour; every module the
page imports exists and every vendored library ships with its license. No browser needed.

Must not: reach the network.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re

import httpx

from evacore.web import STATIC_DIR

JS = STATIC_DIR / "js"
VENDOR = STATIC_DIR / "vendor"
IMPORT = re.compile(r"""(?:^|\s)(?:import|export)\s[^"';]*?from\s*["']([^"']+)["']|import\(["']([^"']+)["']\)""")


def import_map() -> dict[str, str]:
    html = (STATIC_DIR / "index.html").read_text()
    block = re.search(r'<script type="importmap">(.*?)</script>', html, re.DOTALL)
    assert block, "index.html has no import map"
    return json.loads(block.group(1))["imports"]


async def test_r14_4_page_is_served_at_root_with_a_strict_policy(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/", headers={"Authorization": ""})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert '<div id="app">' in r.text
    policy = r.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "connect-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    block = re.search(r'<script type="importmap">(.*?)</script>', r.text, re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(block.group(1).encode()).digest()).decode()
    assert f"'sha256-{digest}'" in policy  # the import map is the one inline script allowed


async def test_r14_4_static_files_come_from_the_package(client: httpx.AsyncClient) -> None:
    r = await client.get("/web/js/main.js")
    assert r.status_code == 200
    assert "javascript" in r.headers["content-type"]
    assert r.text == (JS / "main.js").read_text()
    assert r.headers["cache-control"] == "no-cache" and r.headers.get("etag")
    again = await client.get("/web/js/main.js", headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304
    assert (await client.get("/web/vendor/preact.js")).status_code == 200
    for path in ("/web/../__init__.py", "/web/%2e%2e/__init__.py", "/web/nothing.js"):
        assert (await client.get(path)).status_code == 404, path


async def test_r14_4_api_paths_are_not_shadowed(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/no-such-thing")
    assert r.status_code == 404
    assert "error" in r.json()
    assert (await client.get("/v1/health")).status_code == 200
    metrics = await client.get("/metrics")
    assert metrics.status_code == 200 and "text/plain" in metrics.headers["content-type"]
    schema = (await client.get("/openapi.json")).json()
    assert "/" not in schema["paths"] and not any(p.startswith("/web") for p in schema["paths"])


def test_r14_4_every_import_of_the_page_resolves() -> None:
    mapped = import_map()
    for name, target in mapped.items():
        assert (STATIC_DIR / target.removeprefix("./web/")).is_file(), (name, target)
    checked = 0
    for module in [*JS.glob("*.js"), *VENDOR.glob("*.js")]:
        for match in IMPORT.finditer(module.read_text()):
            spec = match.group(1) or match.group(2)
            if spec.startswith("."):
                assert (module.parent / spec).resolve().is_file(), (module.name, spec)
            else:
                assert spec in mapped, f"{module.name} imports {spec!r}, not in the import map"
            checked += 1
    assert checked > 20


def test_r14_4_vendored_libraries_are_pinned_with_licenses() -> None:
    readme = (VENDOR / "README.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \| (\S+)@(\d+\.\d+\.\d+) `[^`]+` \| ([^|]+) \| `(sha512-[^`]+)` \|$",
                      readme, re.MULTILINE)
    files = {p.name for p in VENDOR.glob("*.js")}
    assert {r[0] for r in rows} == files
    licenses = {p.name for p in (VENDOR / "licenses").iterdir()}
    for _, package, _, _, _ in rows:
        assert any(name.startswith(f"{package}-LICENSE") for name in licenses), package
    for name in files:  # no source-map comment that would ask for a file not shipped
        assert "sourceMappingURL" not in (VENDOR / name).read_text(), name
