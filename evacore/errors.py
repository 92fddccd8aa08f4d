"""One exception tree for evacore, each class with a stable `code` and an HTTP `status`.

Messages and details are redacted as the error is made (`evacore.redact`): no API key,
token or secret header value of a known connection survives into what an error shows.

Must not: import anything from evacore but `evacore.redact` (every layer imports this module).

    EvacoreError (internal, 500)
    ├── InvalidInput (invalid_input, 422)
    │   ├── RuleInvalid (rule_invalid)
    │   ├── ImportInvalid (import_invalid)
    │   ├── PatchFailed (patch_failed)
    │   └── ContextOverflow (context_overflow)
    ├── BadRequest (bad_request, 400)
    ├── Unauthorized (unauthorized, 401)
    ├── Forbidden (forbidden, 403)
    │   └── PathEscape (path_escape)
    ├── NotFound (not_found, 404)
    ├── Conflict (conflict, 409)
    ├── TooLarge (too_large, 413)
    ├── UnsupportedMedia (unsupported_media, 415)
    ├── Aborted (aborted, 499)
    ├── ProviderError (provider_error, 502)
    │   ├── ProviderHTTPError (provider_http_error)
    │   ├── ProviderProtocolError (provider_protocol_error)
    │   ├── ProviderConnectionError (provider_connection_error)
    │   └── ProviderTimeout (provider_timeout, 504)
    └── ToolError (tool_error, 500) — becomes an `error: …` tool result, never an HTTP error
"""

from __future__ import annotations

from evacore.redact import redact, redact_value


class EvacoreError(Exception):
    code = "internal"
    status = 500

    def __init__(self, message: str = "", **details: object) -> None:
        message = redact(message)
        super().__init__(message or self.__class__.__doc__ or self.code)
        self.message = message or (self.__class__.__doc__ or self.code).strip()
        self.details = redact_value(details)

    def to_dict(self) -> dict[str, object]:
        body: dict[str, object] = {"code": self.code, "message": redact(self.message)}
        if self.details:
            body["details"] = redact_value(self.details)
        return body


class InvalidInput(EvacoreError):
    """The input is not valid."""

    code = "invalid_input"
    status = 422


class RuleInvalid(InvalidInput):
    """The stream rule is not valid."""

    code = "rule_invalid"


class ImportInvalid(InvalidInput):
    """The imported file is malformed."""

    code = "import_invalid"


class PatchFailed(InvalidInput):
    """The diff does not apply."""

    code = "patch_failed"


class ContextOverflow(InvalidInput):
    """Protected content alone does not fit the context budget."""

    code = "context_overflow"


class BadRequest(EvacoreError):
    """The request is malformed."""

    code = "bad_request"
    status = 400


class Unauthorized(EvacoreError):
    """A valid bearer token is required."""

    code = "unauthorized"
    status = 401


class Forbidden(EvacoreError):
    """This identity may not do that."""

    code = "forbidden"
    status = 403


class PathEscape(Forbidden):
    """The path leads outside the workspace."""

    code = "path_escape"


class NotFound(EvacoreError):
    """Not found."""

    code = "not_found"
    status = 404


class Conflict(EvacoreError):
    """That conflicts with what is stored."""

    code = "conflict"
    status = 409


class ChatBusy(Conflict):
    """The chat has too many tours running or waiting."""

    code = "chat_busy"


class TooLarge(EvacoreError):
    """The input is too large."""

    code = "too_large"
    status = 413


class UnsupportedMedia(EvacoreError):
    """This kind of file is not supported."""

    code = "unsupported_media"
    status = 415


class Aborted(EvacoreError):
    """The tour was aborted."""

    code = "aborted"
    status = 499


class ProviderError(EvacoreError):
    """The provider failed."""

    code = "provider_error"
    status = 502

    def __init__(self, message: str = "", *, retryable: bool = False, **details: object) -> None:
        super().__init__(message, **details)
        self.retryable = retryable


class ProviderHTTPError(ProviderError):
    """The provider answered with an HTTP error."""

    code = "provider_http_error"


class ProviderProtocolError(ProviderError):
    """The provider's answer could not be parsed."""

    code = "provider_protocol_error"


class ProviderConnectionError(ProviderError):
    """The connection to the provider failed."""

    code = "provider_connection_error"


class ProviderTimeout(ProviderError):
    """The provider did not answer in time."""

    code = "provider_timeout"
    status = 504


class ToolError(EvacoreError):
    """A tool failed; its message becomes an `error: …` tool result."""

    code = "tool_error"
