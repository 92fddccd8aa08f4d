from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette

CORPUS_DIR = Path(__file__).parent / "corpus"
CORPUS = {p.stem: p.read_text(encoding="utf-8") for p in sorted(CORPUS_DIR.glob("*.txt"))}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def loopback_server() -> Iterator[Callable[[Starlette], str]]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 in a thread; yields a starter."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(app: Starlette) -> str:
        port = _free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error",
                                lifespan="off")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("loopback server did not start")
            time.sleep(0.01)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=5)


@pytest.fixture
def free_port() -> int:
    return _free_port()
