"""Renders every error as `{"error": {"code", "message"}}` with a fitting status (R8).

Must not: hide a server bug as a 4xx; unexpected exceptions are logged and become 500 `internal`.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm.exc import StaleDataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from evacore.errors import EvacoreError
from evacore.formats.limits import MAX_MESSAGE_CHARS
from evacore.logs import get_logger
from evacore.redact import redact, redact_value
from evacore.store.db import refuses_nul

log = get_logger(__name__)
NUL_MESSAGE = "text in the request must not contain NUL characters (U+0000)"

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media",
    422: "invalid_input",
    429: "too_many_requests",
}


def error_response(status: int, code: str, message: str, **extra: object) -> JSONResponse:
    """The one error body; its message and details pass the redactor."""
    body: dict[str, object] = {"code": code, "message": redact(message)}
    body.update(redact_value(extra))
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _describe_validation(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        parts.append(f"{loc or 'body'}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def response_for(exc: Exception) -> JSONResponse:
    """The answer to an exception a route raised: the one error body with its status (an
    unexpected exception is logged and becomes 500 `internal`)."""
    if isinstance(exc, EvacoreError):
        status = exc.status if exc.status < 500 or exc.code != "internal" else 500
        if status >= 500 and exc.code == "internal":
            log.error("request.failed", error=str(exc))
        extra = {"details": exc.details} if exc.details else {}
        return error_response(status, exc.code, exc.message, **extra)
    if isinstance(exc, RequestValidationError):
        if (limit := _message_too_long(exc)) is not None:
            return error_response(413, "too_large", f"a message is at most {limit:,} characters",
                                  details={"limit": limit})
        return error_response(422, "invalid_input", _describe_validation(exc))
    if isinstance(exc, StarletteHTTPException):
        code = _HTTP_CODES.get(exc.status_code, "error")
        return error_response(exc.status_code, code, str(exc.detail))
    if isinstance(exc, IntegrityError):
        log.warning("request.integrity_error", error=str(exc.orig)[:200])
        return error_response(409, "conflict", "that conflicts with what is stored")
    if isinstance(exc, StaleDataError):
        # a row this request read was changed or removed by another one meanwhile
        log.warning("request.stale_row", error=str(exc)[:200])
        return error_response(409, "conflict", "another request changed this record at the "
                              "same time; read it again and retry")
    if refuses_nul(exc):
        return error_response(422, "invalid_input", NUL_MESSAGE)
    if isinstance(exc, OverflowError):
        # a number from the request too large for the database (past 64 bits)
        log.warning("request.number_out_of_range", error=str(exc)[:200])
        return error_response(422, "invalid_input", "a number in the request is out of range")
    log.exception("request.crashed", error_type=type(exc).__name__, exc_info=exc)
    return error_response(500, "internal", "internal error")


def _message_too_long(exc: RequestValidationError) -> int | None:
    """The limit a message's text went past (`message.content`, a message's `content`): a
    limit of size, answered 413 as every other (docs/api.md Limits), not a 422."""
    for error in exc.errors():
        limit = (error.get("ctx") or {}).get("max_length")
        if (error.get("type") == "string_too_long" and tuple(error.get("loc") or ())[-1:]
                == ("content",) and limit == MAX_MESSAGE_CHARS):
            return int(limit)
    return None


_HANDLED = (EvacoreError, RequestValidationError, StarletteHTTPException, IntegrityError,
            StaleDataError, OverflowError, DBAPIError, Exception)
"""A class named here is answered where the route raised it; `Exception`, the rest, only by
Starlette's outermost layer, which answers and then raises it again (the server logs it and
drops the connection): a database refusal of bad input must not take that road."""


def install_error_handlers(app: FastAPI) -> None:
    async def _handle(_: Request, exc: Exception) -> JSONResponse:
        return response_for(exc)

    for kind in _HANDLED:
        app.add_exception_handler(kind, _handle)
