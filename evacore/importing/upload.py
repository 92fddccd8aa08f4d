"""Read an uploaded file from an HTTP request: a multipart `file` field or a raw JSON body,
counting bytes (and, for line files, lines) as they arrive so an oversized upload stops
early (413).

Must not: look inside the file (the formats readers do) or touch the database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import ClientDisconnect, Request

from evacore.errors import BadRequest, TooLarge, UnsupportedMedia
from evacore.formats.limits import DEFAULT_LIMITS, Limits

MULTIPART_SLACK = 256 * 1024
"""Bytes allowed on top of the file limit for multipart boundaries, headers and fields."""
MAX_FIELD_BYTES = 64 * 1024
LINE_SLACK = 64
"""Lines allowed on top of a line cap for the multipart envelope (boundaries, part headers)."""

UPLOAD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["file"],
    "additionalProperties": False,
    "properties": {"file": {"type": "string", "format": "binary"}},
}


def import_limits(core: Any) -> Limits:
    """The core's limits for imports (`core.import_limits`), else the defaults; the default
    limits take the file size the settings allow (`limits.max_upload_bytes`)."""
    limits = getattr(core, "import_limits", None)
    if not isinstance(limits, Limits):
        limits = DEFAULT_LIMITS
    upload = getattr(getattr(getattr(core, "settings", None), "limits", None),
                     "max_upload_bytes", None)
    if limits == DEFAULT_LIMITS and isinstance(upload, int) and upload != limits.max_input_bytes:
        return replace(limits, max_input_bytes=upload)
    return limits


def upload_body(*, json_body: bool = False, fields: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    """The OpenAPI `requestBody` of an upload endpoint (routes parse the body themselves)."""
    schema = {**UPLOAD_SCHEMA, "properties": {**UPLOAD_SCHEMA["properties"], **(fields or {})}}
    content: dict[str, Any] = {"multipart/form-data": {"schema": schema}}
    if json_body:
        content["application/json"] = {"schema": {"type": "object"}}
    return {"requestBody": {"required": True, "content": content}}


@dataclass
class Upload:
    content: bytes
    filename: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    kind: str = "file"
    """`file` (multipart) or `json` (a raw JSON body)."""


def _too_large(limit: int) -> TooLarge:
    return TooLarge(f"the upload is larger than {limit} bytes", limit=limit)


def _too_many_lines(limit: int) -> TooLarge:
    return TooLarge(f"the upload has more than {limit} lines; the limit is {limit}", limit=limit)


async def _capped(request: Request, cap: int, max_lines: int | None = None
                  ) -> AsyncIterator[bytes]:
    seen = 0
    lines = 0
    line_cap = -1 if max_lines is None else max_lines + LINE_SLACK
    try:
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > cap:
                raise _too_large(cap)
            if line_cap >= 0:
                lines += chunk.count(b"\n")
                if lines > line_cap:
                    raise _too_many_lines(max_lines or 0)
            yield chunk
    except ClientDisconnect:
        raise BadRequest("the client disconnected during the upload") from None


async def _drain(stream: AsyncIterator[bytes]) -> None:
    """Read what is left of a body we refuse, so the connection closes cleanly (an unread body
    would make the server reset it before the client reads the error); stops at the cap."""
    try:
        async for _ in stream:
            pass
    except (TooLarge, BadRequest):
        pass


async def _raw(request: Request, cap: int, max_lines: int | None) -> bytes:
    buffer = bytearray()
    async for chunk in _capped(request, cap, max_lines):
        buffer += chunk
    return bytes(buffer)


async def read_upload(request: Request, limits: Limits, *, json_body: bool = False,
                      max_bytes: int | None = None, max_lines: int | None = None) -> Upload:
    """The uploaded bytes; 413 past the limit (`max_bytes`, default the limits' file size)
    or past `max_lines` newlines, 415 for another content type, 400 for a broken multipart
    body or a missing `file` field. A raw JSON body is a file in itself: it may not be
    larger than the limits' `max_text_bytes`."""
    limit = limits.max_input_bytes if max_bytes is None else max_bytes
    ctype = request.headers.get("content-type", "")
    main = ctype.split(";", 1)[0].strip().lower()
    as_json = json_body and (main == "application/json" or main.endswith("+json"))
    if as_json:
        limit = min(limit, limits.max_text_bytes)
    declared = request.headers.get("content-length")
    slack = 0 if as_json else MULTIPART_SLACK
    if declared is not None and declared.isdigit() and int(declared) > limit + slack:
        raise _too_large(limit)
    if main == "multipart/form-data":
        return await _multipart(request, limit, max_lines)
    if as_json:
        content = await _raw(request, limit, max_lines)
        return Upload(content=content, kind="json")
    accepted = "multipart/form-data with a `file` field"
    if json_body:
        accepted += " or an application/json card"
    await _drain(_capped(request, limit + MULTIPART_SLACK))
    raise UnsupportedMedia(f"send {accepted} (got {main or 'no content type'})")


async def _multipart(request: Request, limit: int, max_lines: int | None) -> Upload:
    stream = _capped(request, limit + MULTIPART_SLACK, max_lines)
    parser = MultiPartParser(request.headers, stream, max_files=2, max_fields=16,
                             max_part_size=MAX_FIELD_BYTES)
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        await _drain(stream)
        raise BadRequest(f"malformed multipart body: {exc.message}") from None
    except (ValueError, KeyError, IndexError, UnicodeError) as exc:
        await _drain(stream)
        raise BadRequest(f"malformed multipart body: {exc}") from None
    try:
        item = form.get("file")
        if isinstance(item, UploadFile):
            content = await item.read()
            filename = item.filename
        elif isinstance(item, str):
            content, filename = item.encode("utf-8"), None
        else:
            raise BadRequest("the form has no `file` field")
        if len(content) > limit:
            raise _too_large(limit)
        fields = {k: v for k, v in form.multi_items() if k != "file" and isinstance(v, str)}
        return Upload(content=content, filename=filename, fields=fields)
    finally:
        await form.close()


def download_headers(name: str, ext: str) -> dict[str, str]:
    """`Content-Disposition: attachment` with an ASCII fallback and the UTF-8 file name."""
    from urllib.parse import quote

    from evacore.importing.export import safe_name

    stem = safe_name(name)
    ascii_stem = stem.encode("ascii", "replace").decode("ascii").replace("?", "_")
    ascii_stem = ascii_stem.replace('"', "_").replace(";", "_")
    return {"Content-Disposition": f'attachment; filename="{ascii_stem}.{ext}"; '
                                   f"filename*=UTF-8''{quote(stem)}.{ext}"}
