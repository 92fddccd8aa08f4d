"""Browser fixtures for the web page (R14.4): a real evacore server on loopback (the app of
`evacore serve`, in a thread) with a fake OpenAI-compatible upstream, and Debian's chromium
driven by Playwright, one of each per module.

Must not: let the browser reach anything but 127.0.0.1, or download a browser: without
/usr/bin/chromium the browser tests skip, except under CI, where they fail.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn

from evacore.config import Settings
from evacore.server.app import create_app
from tests.fakes.upstream import FakeUpstream
from tests.helpers import free_port

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 # any name but loopback fails to resolve: nothing can leave the machine
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
TOKEN = "evc_web_master_token_0123456789abcdef"
SHOTS_ENV = "EVACORE_WEB_SCREENSHOTS"
"""A folder that also receives every screenshot (how docs/web/ is refreshed)."""

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


@dataclass
class Evacore:
    """The server under test, its fake upstream and a master API client."""

    url: str
    fake: FakeUpstream
    api: httpx.Client
    fake_connection_id: str
    shots: Path

    def chat(self, **body: Any) -> dict[str, Any]:
        r = self.api.post("/v1/chats", json=body)
        assert r.status_code == 201, r.text
        return r.json()

    def messages(self, chat_id: str) -> list[dict[str, Any]]:
        r = self.api.get(f"/v1/chats/{chat_id}/messages")
        assert r.status_code == 200, r.text
        return r.json()["messages"]


class _Server:
    """`create_app(settings)` served by uvicorn on 127.0.0.1 in a thread of its own, with its
    own event loop: the app opens and closes its core in its lifespan, as `evacore serve` does."""

    def __init__(self, settings: Settings) -> None:
        self.server = uvicorn.Server(uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=free_port(), log_level="warning",
            lifespan="on", access_log=False,
        ))
        self.thread = threading.Thread(target=self.server.run, name="evacore-web", daemon=True)

    def start(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the evacore server did not start")
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.server.config.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


@pytest.fixture(scope="module")
def evacore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evacore]:
    root = tmp_path_factory.mktemp("web")
    fake = FakeUpstream("openai-chat").start()
    server = _Server(Settings(data_dir=root / "data",
                              database_url=f"sqlite+aiosqlite:///{root / 'evacore.db'}",
                              master_token=TOKEN, log_format="json", log_level="WARNING"))
    url = server.start()
    api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    try:
        r = api.post("/v1/connections", json={
            "name": "fake", "kind": "openai-chat", "base_url": fake.base_url,
            "api_key": "sk-fake", "model": "fake-model", "vision": True,
        })
        assert r.status_code == 201, r.text
        shots = root / "screenshots"
        shots.mkdir()
        yield Evacore(url, fake, api, r.json()["id"], shots)
    finally:
        api.close()
        server.stop()
        fake.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's chromium; skipped where it is missing, except under CI, where it must run."""
    if not CHROMIUM.exists() and not os.environ.get("CI"):
        pytest.skip("chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@dataclass
class Watch:
    """What the page did that it must not: JS errors, requests off loopback, missing files."""

    errors: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    expected_statuses: set[int] = field(default_factory=set)

    def check(self) -> None:
        assert not self.foreign, f"requests left 127.0.0.1: {self.foreign}"
        assert not self.errors, f"JavaScript errors: {self.errors}"
        assert not self.missing, f"page files not served: {self.missing}"


def _console(watch: Watch, message: Any) -> None:
    if message.type != "error":
        return
    text = message.text
    if text.startswith("Failed to load resource: the server responded with a status of 4"):
        status = int(text.split("status of ")[1][:3])
        if status in watch.expected_statuses:
            return
    source = (message.location or {}).get("url", "")
    if "Content Security Policy" in text and source.endswith("/vendor/purify.js"):
        return  # DOMPurify's inert parse of hostile markup, reported and blocked by the CSP
    watch.errors.append(f"console: {text} ({source})")


@pytest.fixture
def watch() -> Watch:
    return Watch()


def open_page(browser: Browser, evacore: Evacore, watch: Watch, *,
              width: int = 1280, height: int = 820) -> Page:
    context = browser.new_context(viewport={"width": width, "height": height},
                                  accept_downloads=True)

    def record(request: Any) -> None:
        if urlsplit(request.url).hostname not in (None, "127.0.0.1"):
            watch.foreign.append(request.url)

    context.on("request", record)
    page = context.new_page()
    page.on("pageerror", lambda exc: watch.errors.append(f"pageerror: {exc}"))
    page.on("console", lambda m: _console(watch, m))
    page.on("response", lambda r: watch.missing.append(f"{r.status} {r.url}")
            if "/web/" in r.url and r.status >= 400 else None)
    page.set_default_timeout(10_000)
    return page


@pytest.fixture
def page(browser: Browser, evacore: Evacore, watch: Watch) -> Iterator[Page]:
    while evacore.fake.script.pending():  # nothing left over from an earlier test
        evacore.fake.script.next()
    p = open_page(browser, evacore, watch)
    try:
        yield p
    finally:
        p.context.close()
    watch.check()


def sign_in(page: Page, evacore: Evacore, token: str = TOKEN) -> None:
    page.goto(evacore.url + "/")
    page.get_by_role("textbox", name="Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("navigation").get_by_role("link", name="Chats").wait_for()


def shot(page: Page, evacore: Evacore, name: str) -> Path:
    """A screenshot in the module's temp dir (and the docs folder when asked for)."""
    path = evacore.shots / f"{name}.png"
    page.screenshot(path=str(path))
    extra = os.environ.get(SHOTS_ENV)
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / path.name)
    return path


def new_chat(page: Page, evacore: Evacore, *, fake: bool = True) -> str:
    """Open Chats, press `New chat` (on the fake upstream's connection); returns the chat id."""
    page.get_by_role("navigation").get_by_role("link", name="Chats").click()
    if fake:
        page.get_by_label("Connection").select_option(evacore.fake_connection_id)
    page.get_by_role("button", name="New chat").click()
    page.wait_for_url("**/#/chats/*")
    return page.url.rsplit("/", 1)[1]
