"""The `kobold` adapter: KoboldCpp's native API in text mode — /api/v1/generate,
/api/extra/generate/stream (SSE `{"token": …}`), /api/extra/abort with a genkey,
/api/extra/tokencount.

Must not: touch the prompt (the instruct render already appended any prefill), or leave a
generation running upstream when the answer is abandoned (it aborts by genkey).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx
import structlog

from evacore.errors import InvalidInput, ProviderProtocolError
from evacore.providers._http import HTTPProvider
from evacore.providers._sse import SSEEvent, parse_json_object
from evacore.providers._tokenize import kobold_tokencount
from evacore.providers._transport import label
from evacore.providers._urls import join_url
from evacore.providers.base import (
    Answer,
    Connection,
    Finish,
    ProviderEvent,
    ProviderRequest,
    TextDelta,
    WireRequest,
    effective_max_tokens,
    effective_model,
    effective_params,
    with_params,
)

log = structlog.get_logger(__name__)

KOBOLD_PARAMS = frozenset({
    "temperature", "top_p", "top_k", "top_a", "typical", "tfs", "min_p", "rep_pen",
    "rep_pen_range", "rep_pen_slope", "presence_penalty", "sampler_order", "sampler_seed",
    "dynatemp_range", "dynatemp_exponent", "smoothing_factor", "mirostat", "mirostat_tau",
    "mirostat_eta", "dry_multiplier", "dry_base", "dry_allowed_length",
    "dry_sequence_breakers", "dry_penalty_last_n", "xtc_threshold", "xtc_probability",
    "nsigma", "grammar", "grammar_retain_state", "memory", "banned_tokens", "logit_bias",
    "use_default_badwordsids", "render_special", "bypass_eos", "images", "trim_stop",
})
# common sampler names (OpenAI/SillyTavern style) -> KoboldCpp names
KOBOLD_ALIASES = {"repetition_penalty": "rep_pen", "typical_p": "typical", "tfs_z": "tfs",
                  "seed": "sampler_seed"}
_FINISH = {"eos": "stop", "eos_token": "stop", "max_length": "length"}


def kobold_root(base: str) -> str:
    """The server root below `…/api/v1` or `…/api`; `base` has no query (see `kobold_url`)."""
    url = base.strip().rstrip("/")
    for suffix in ("/api/v1", "/api"):
        if url.endswith(suffix):
            return url[: -len(suffix)]
    return url


def kobold_url(base_url: str, path: str) -> str:
    """An endpoint below the server root; the base URL's query string is kept."""
    return join_url(base_url, path, kobold_root)


def new_genkey() -> str:
    return "KCPP" + secrets.token_hex(4).upper()


def build_request_body(
    connection: Connection, request: ProviderRequest, *, stream: bool, genkey: str | None = None
) -> dict[str, Any]:
    """The exact JSON body sent to /api/v1/generate or /api/extra/generate/stream (pure)."""
    if request.prompt is None:
        raise InvalidInput("kobold needs a rendered prompt (text mode)")
    params = effective_params(connection, request)
    body: dict[str, Any] = {
        "prompt": request.prompt,
        "max_length": effective_max_tokens(connection, request),
        "max_context_length": connection.context_size,
        "trim_stop": True,
    }
    if request.stop:
        body["stop_sequence"] = list(request.stop)
    if genkey:
        body["genkey"] = genkey
    for alias, name in KOBOLD_ALIASES.items():
        if alias in params and name not in params:
            body[name] = params[alias]
    return with_params(body, params, KOBOLD_PARAMS)


def _finish(reason: Any) -> str:
    return _FINISH.get(reason, reason) if isinstance(reason, str) and reason else "stop"


class KoboldProvider(HTTPProvider):
    kind = "kobold"

    def __init__(self, connection: Connection, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self._aborts: set[asyncio.Task[None]] = set()
        self._count_missing = False

    def build_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        return build_request_body(self.connection, request, stream=stream, genkey=new_genkey())

    def endpoint(self, *, stream: bool) -> str:
        return kobold_url(self.connection.base_url,
                          "/api/extra/generate/stream" if stream else "/api/v1/generate")

    def headers(self, request: ProviderRequest | None, *, stream: bool) -> dict[str, str]:
        headers = {"Content-Type": "application/json",
                   "Accept": "text/event-stream" if stream else "application/json"}
        if self.connection.api_key:
            headers["Authorization"] = f"Bearer {self.connection.api_key}"
        return headers

    def _model(self, request: ProviderRequest) -> str | None:
        return effective_model(self.connection, request) or None

    async def upstream_events(  # type: ignore[override]
        self, wire: WireRequest, request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        """The stream; if it ends before the upstream finished (cancel, disconnect, stop
        string, error), the generation is aborted by its genkey, best effort."""
        genkey = str(wire.body.get("genkey", ""))
        finished = False
        try:
            async with aclosing(super().upstream_events(wire, request)) as events:
                async for event in events:
                    finished = isinstance(event, Finish)
                    yield event
        finally:
            if not finished and genkey:
                self._abort_later(genkey)

    async def complete(self, request: ProviderRequest) -> Answer:
        wire = self.wire_request(request, stream=False)
        try:
            return await self.complete_wire(wire, request)
        except BaseException:
            self._abort_later(str(wire.body.get("genkey", "")))
            raise

    def _abort_later(self, genkey: str) -> None:
        try:
            task = asyncio.get_running_loop().create_task(self.abort(genkey))
        except RuntimeError:
            return
        self._aborts.add(task)
        task.add_done_callback(self._aborts.discard)

    async def abort(self, genkey: str) -> None:
        """POST /api/extra/abort for this generation only; never raises."""
        url = kobold_url(self.connection.base_url, "/api/extra/abort")
        try:
            await self._client.post(
                url, json={"genkey": genkey}, headers=self.headers(None, stream=False),
                timeout=httpx.Timeout(self.connection.timeouts.connect),
            )
        except httpx.HTTPError as exc:
            log.info("provider.abort_failed", kind=self.kind, error=type(exc).__name__)

    async def parse_stream(
        self, events: AsyncIterator[SSEEvent], request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        reason: Any = None
        async for sse in events:
            if not sse.data.strip():
                continue
            payload = parse_json_object(sse.data, "stream event")
            token = payload.get("token")
            if isinstance(token, str) and token:
                yield TextDelta(token)
            if payload.get("finish_reason"):
                reason = payload["finish_reason"]
        yield Finish(_finish(reason), None, self._model(request))

    def parse_answer(self, body: dict[str, Any], request: ProviderRequest) -> Answer:
        results = body.get("results")
        if not isinstance(results, list) or not results or not isinstance(results[0], dict):
            raise ProviderProtocolError(f"{label(self.connection)}: the answer has no results")
        text = results[0].get("text")
        return Answer(
            text=text if isinstance(text, str) else "",
            finish_reason=_finish(results[0].get("finish_reason")),
            usage=None,
            model=self._model(request),
        )

    async def count_tokens(self, text: str) -> int | None:
        """KoboldCpp's `POST /api/extra/tokencount`."""
        if self._count_missing:
            return None
        count, missing = await kobold_tokencount(
            self._client, kobold_url(self.connection.base_url, "/api/extra/tokencount"),
            self.connection, text,
        )
        self._count_missing = missing
        return count

    async def aclose(self) -> None:
        if self._aborts:
            await asyncio.wait(set(self._aborts), timeout=self.connection.timeouts.connect)
        await super().aclose()
