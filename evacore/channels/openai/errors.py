"""OpenAI's error envelope for the facade's routes: `{"error": {"message", "type", "param",
"code"}}` with a fitting status, for evacore's own errors too.

Must not: render evacore's `{"error": {"code", "message"}}` shape or FastAPI's `{"detail"}`;
these routes speak OpenAI's protocol only.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import Response

from evacore.errors import (
    Aborted,
    ContextOverflow,
    EvacoreError,
    InvalidInput,
    ProviderError,
)

_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "invalid_request_error", 405: "invalid_request_error", 409: "invalid_request_error",
    413: "invalid_request_error", 415: "invalid_request_error", 422: "invalid_request_error",
    429: "rate_limit_error", 499: "invalid_request_error",
}


class FacadeError(Exception):
    """An error as an OpenAI client receives it."""

    def __init__(self, status: int, message: str, *, code: str | None = None,
                 param: str | None = None, type: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param
        self.type = type or _TYPES.get(status, "api_error" if status >= 500 else
                                       "invalid_request_error")

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}

    def response(self, headers: dict[str, str] | None = None) -> Response:
        extra = dict(headers or {})
        if self.status == 401:
            extra["WWW-Authenticate"] = "Bearer"
        return Response(orjson.dumps(self.body()), status_code=self.status,
                        media_type="application/json", headers=extra)


def from_evacore(exc: EvacoreError) -> FacadeError:
    """Evacore's error in OpenAI's terms: invalid input is a 400 (OpenAI's status for a bad
    request), a failing provider a 502, the rest keep their status."""
    if isinstance(exc, ContextOverflow):
        return FacadeError(400, exc.message, code="context_length_exceeded", param="messages")
    if isinstance(exc, InvalidInput):
        return FacadeError(400, exc.message, code=exc.code)
    if isinstance(exc, ProviderError):
        return FacadeError(502, exc.message, code=exc.code)
    return FacadeError(exc.status, exc.message, code=exc.code)


_BY_CODE: dict[str, type[EvacoreError]] = {}


def from_code(code: str, message: str) -> FacadeError:
    """A failed tour's error (`{"code", "message"}`) in OpenAI's terms."""
    if not _BY_CODE:
        stack: list[type[EvacoreError]] = [EvacoreError]
        while stack:
            cls = stack.pop()
            _BY_CODE.setdefault(cls.code, cls)
            stack.extend(cls.__subclasses__())
    cls = _BY_CODE.get(code, EvacoreError)
    if cls is EvacoreError:
        return FacadeError(500, message, code=code, type="server_error")
    if issubclass(cls, Aborted):
        return FacadeError(499, message, code=code)
    return from_evacore(cls(message))


def error_line(error: FacadeError) -> bytes:
    """A failure after the first chunk: one `data: {"error": …}` line, then `[DONE]`."""
    return b"data: " + orjson.dumps(error.body()) + b"\n\ndata: [DONE]\n\n"
