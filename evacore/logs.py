"""Structured logging: JSON when stderr is not a terminal, a readable console otherwise.

Every line passes `evacore.redact` (fields, messages of stdlib loggers, rendered
tracebacks), so a known key or a secret-shaped token never reaches the output.

Must not: log secrets (API keys, tokens) or whole prompts; prompts belong in diagnostics.
A tour binds `tour_id`/`chat_id` once with `bind_tour`; every line inside carries them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import structlog
from structlog.contextvars import bound_contextvars, merge_contextvars

from evacore.redact import structlog_processor as redact_secrets

_configured = False


def configure_logging(fmt: str = "auto", level: str = "INFO") -> None:
    """Configure structlog and route stdlib logging through the same renderer, to stderr."""
    global _configured
    as_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    )
    shared: list[structlog.types.Processor] = [
        merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_secrets,
    ]
    foreign = [*shared, structlog.stdlib.ExtraAdder()]
    structlog.configure(
        # a line below the level is dropped before anything is done for it (time stamp,
        # redaction): a tour's info line costs nothing when the level is WARNING
        processors=[structlog.stdlib.filter_by_level, *shared,
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=foreign,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                redact_secrets,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_evacore", False):
            root.removeHandler(old)
    handler._evacore = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    # alembic.runtime.plugins: a line per built-in plugin each time alembic is imported
    for noisy in ("httpx", "httpcore", "aiosqlite", "asyncio", "alembic.runtime.plugins"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    _configured = True


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)


@contextmanager
def bind_tour(tour_id: str, chat_id: str | None = None) -> Iterator[None]:
    """Every log line inside carries the tour (and chat) id; tasks created inside inherit it."""
    with bound_contextvars(tour_id=tour_id, chat_id=chat_id):
        yield
