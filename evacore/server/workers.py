"""`evacore serve --workers N`: uvicorn's own supervisor of worker processes, each worker
serving with `QuietServer` (serving.py) instead of uvicorn's server, whose main loop wakes
ten times a second.

Must not: change how uvicorn supervises its workers (starts, health checks, restarts,
shutdown): only the server each worker runs is ours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from socket import socket

import uvicorn
from uvicorn.supervisors import Multiprocess, multiprocess

from evacore.server.serving import QuietServer


class QuietProcess(multiprocess.Process):
    """uvicorn's worker process, serving with `QuietServer`: the server is made here, in the
    supervisor, and travels to the worker with the process object (a worker is spawned, so
    it imports uvicorn afresh and would otherwise make uvicorn's own server)."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket]) -> None:
        super().__init__(config, sockets)
        self._server = QuietServer(config)


@contextlib.contextmanager
def _quiet_processes() -> Iterator[None]:
    """The supervisor makes its workers (at start, and again on a restart) of this class."""
    made = multiprocess.Process
    multiprocess.Process = QuietProcess  # type: ignore[misc]
    try:
        yield
    finally:
        multiprocess.Process = made  # type: ignore[misc]


def serve_workers(config: uvicorn.Config) -> None:
    """Serve `config` (its app an import string, `workers` > 1) as uvicorn's `run` does with
    several workers: one socket bound here, uvicorn's supervisor, its workers quiet."""
    sock = config.bind_socket()
    with _quiet_processes():
        Multiprocess(config, sockets=[sock]).run()
