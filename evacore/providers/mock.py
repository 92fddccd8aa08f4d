"""The `mock` adapter: an offline, deterministic, scriptable provider (R2.10) for the demo and
tests. Stateless: the answer is decided from the request alone (script rules, else an echo).

Must not: touch the network, keep state between requests, or use randomness.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from evacore.errors import (
    InvalidInput,
    ProviderConnectionError,
    ProviderTimeout,
)
from evacore.providers._stop import apply_stop
from evacore.providers._transport import http_error, label
from evacore.providers.base import (
    Answer,
    Connection,
    Finish,
    ProviderEvent,
    ProviderRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    Usage,
    WireRequest,
    collect,
    effective_max_tokens,
    effective_model,
    effective_params,
    heuristic_tokens,
)

RULE_KEYS = frozenset({"match", "if_prompt_contains", "step", "text", "tool_calls", "delay",
                       "token_delay", "error", "finish_reason", "reasoning", "fail_after"})
_WORD = re.compile(r"\s*\S+\s*|\s+")


@dataclass(frozen=True, slots=True)
class MockRule:
    match: re.Pattern[str] | None = None
    if_prompt_contains: str | None = None
    step: int | None = None
    text: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0
    token_delay: float = 0.0
    error: tuple[int, str] | None = None
    finish_reason: str | None = None
    reasoning: str = ""
    fail_after: int | None = None


def _number(rule: dict[str, Any], key: str, kind: type = float) -> Any:
    value = rule.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidInput(f"mock script: {key!r} must be a non-negative number")
    return kind(value)


def parse_rule(raw: Any, where: str) -> MockRule:
    if not isinstance(raw, dict):
        raise InvalidInput(f"mock script {where}: a rule must be an object")
    unknown = set(raw) - RULE_KEYS
    if unknown:
        raise InvalidInput(f"mock script {where}: unknown keys {sorted(unknown)}")
    pattern = None
    if raw.get("match") is not None:
        try:
            pattern = re.compile(str(raw["match"]))
        except re.error as exc:
            raise InvalidInput(f"mock script {where}: bad regex in 'match': {exc}") from None
    calls = []
    for i, call in enumerate(raw.get("tool_calls") or ()):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise InvalidInput(f"mock script {where}: tool_calls[{i}] needs a name")
        args = call.get("arguments", {})
        calls.append((call["name"], args if isinstance(args, str)
                      else json.dumps(args, ensure_ascii=False)))
    error = raw.get("error")
    if error is not None:
        if not isinstance(error, dict) or not isinstance(error.get("status"), int):
            raise InvalidInput(f"mock script {where}: 'error' needs an integer status")
        error = (error["status"], str(error.get("message", "mock error")))
    for key in ("text", "if_prompt_contains", "finish_reason", "reasoning"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise InvalidInput(f"mock script {where}: {key!r} must be a string")
    return MockRule(
        match=pattern, if_prompt_contains=raw.get("if_prompt_contains"),
        step=_number(raw, "step", int), text=raw.get("text"), tool_calls=tuple(calls),
        delay=_number(raw, "delay") or 0.0, token_delay=_number(raw, "token_delay") or 0.0,
        error=error, finish_reason=raw.get("finish_reason"), reasoning=raw.get("reasoning") or "",
        fail_after=_number(raw, "fail_after", int),
    )


def parse_script(raw: Any) -> list[MockRule]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidInput("mock script: params['script'] must be a list of rules")
    return [parse_rule(rule, f"rule {i}") for i, rule in enumerate(raw)]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content
                         if isinstance(p, dict) and p.get("type") == "text")
    return ""


@dataclass(slots=True)
class Facts:
    """What a rule can look at."""

    last_user: str = ""
    step: int = 0
    haystack: str = ""
    prompt_chars: int = 0
    tools: list[str] = field(default_factory=list)


def facts_of(request: ProviderRequest) -> Facts:
    if request.messages is None:
        prompt = request.prompt or ""
        return Facts(last_user=prompt, haystack=prompt, prompt_chars=len(prompt))
    texts = [_text_of(m.get("content")) for m in request.messages]
    last_user, step = "", 0
    for m, text in zip(reversed(request.messages), reversed(texts), strict=True):
        if m.get("role") == "user":
            last_user = text
            break
        if m.get("role") == "assistant":
            step += 1
    haystack = "\n".join(texts)
    return Facts(last_user, step, haystack, len(haystack))


def pick_rule(rules: list[MockRule], facts: Facts) -> MockRule | None:
    for rule in rules:
        if rule.match is not None and not rule.match.search(facts.last_user):
            continue
        if rule.if_prompt_contains is not None and rule.if_prompt_contains not in facts.haystack:
            continue
        if rule.step is not None and rule.step != facts.step:
            continue
        return rule
    return None


def echo(request: ProviderRequest, facts: Facts) -> str:
    if request.messages is None:
        return f"(mock) I read a prompt of {facts.prompt_chars} characters."
    said = " ".join(facts.last_user.split())
    if not said:
        return "(mock) Hello! I am the offline mock provider."
    return f"(mock) You said: {said}"


class MockProvider:
    kind = "mock"

    def __init__(self, connection: Connection, *, client: object | None = None,
                 streams: object | None = None) -> None:
        self.connection = connection
        self._rules = parse_script(connection.params.get("script"))

    def _rules_for(self, request: ProviderRequest) -> list[MockRule]:
        if "script" in request.params:
            return parse_script(request.params["script"])
        return self._rules

    def wire_request(self, request: ProviderRequest, *, stream: bool = True) -> WireRequest:
        body: dict[str, Any] = {"model": effective_model(self.connection, request) or "mock",
                                "stream": stream,
                                "max_tokens": effective_max_tokens(self.connection, request)}
        if request.messages is not None:
            body["messages"] = request.messages
        else:
            body["prompt"] = request.prompt
        for key, value in (("tools", request.tools), ("stop", request.stop),
                           ("prefill", request.prefill)):
            if value:
                body[key] = value
        return WireRequest("POST", "mock://" + body["model"], {}, body)

    async def stream(self, request: ProviderRequest, *, wire: WireRequest | None = None
                     ) -> AsyncIterator[ProviderEvent]:
        events = self._events(request)
        if request.stop:
            events = apply_stop(events, request.stop)
        async with aclosing(events) as it:
            async for event in it:
                yield event

    async def _wait(self, seconds: float, limit: float, which: str) -> None:
        if seconds > limit:
            await asyncio.sleep(limit)
            raise ProviderTimeout(f"{label(self.connection)}: mock waited past {which}",
                                  which=which)
        if seconds > 0:
            await asyncio.sleep(seconds)

    async def _events(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        facts = facts_of(request)
        rule = pick_rule(self._rules_for(request), facts) or MockRule()
        params = effective_params(self.connection, request)
        timeouts = self.connection.timeouts
        await self._wait(rule.delay, timeouts.first_token, "first_token")
        if rule.error is not None:
            status, message = rule.error
            raise http_error(self.connection, status, message)
        text = rule.text
        if text is None and not rule.tool_calls:
            text = echo(request, facts)
        per_delta = max(1, int(params.get("tokens_per_delta", 1)))
        words = _WORD.findall(text or "")
        budget = effective_max_tokens(self.connection, request)
        spent, finish = 0, None
        if rule.reasoning:
            yield ReasoningDelta(rule.reasoning)
        for sent, start in enumerate(range(0, len(words), per_delta)):
            piece = "".join(words[start : start + per_delta])
            cost = heuristic_tokens(piece)
            if spent + cost > budget:
                finish = "length"
                break
            if rule.fail_after is not None and sent >= rule.fail_after:
                raise ProviderConnectionError(f"{label(self.connection)}: mock connection lost")
            if sent:
                await self._wait(rule.token_delay, timeouts.idle, "idle")
            spent += cost
            yield TextDelta(piece)
        calls = [] if finish == "length" else [
            ToolCall(f"call_{facts.step}_{i}", name, args)
            for i, (name, args) in enumerate(rule.tool_calls)
        ]
        for call in calls:
            spent += heuristic_tokens(call.name + call.arguments)
            yield call
        if finish is None:
            finish = rule.finish_reason or ("tool_calls" if calls else "stop")
        prompt_tokens = heuristic_tokens(facts.haystack) + 3 * len(request.messages or ())
        usage = Usage(prompt_tokens, spent, prompt_tokens + spent)
        yield Finish(finish, usage, effective_model(self.connection, request) or "mock")

    async def complete(self, request: ProviderRequest) -> Answer:
        return await collect(self.stream(request))

    async def count_tokens(self, text: str) -> int | None:
        return heuristic_tokens(text)

    async def aclose(self) -> None:
        return None

