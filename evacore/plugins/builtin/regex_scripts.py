"""Built-in plugin: SillyTavern-style regex scripts over user input, AI output and the prompt.

Must not: change stored messages (it works on the tour's prompt copy and on the final answer
before it is saved) or run a pattern without a time bound (see _regex_engine).
Placement semantics are documented in docs/plugins.md ("The regex-scripts plugin").
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from evacore.plugins.builtin._regex_engine import (
    PatternCache,
    RegexTimeout,
    compile_find,
    replace,
    split_find,
    substitute_find,
)
from evacore.plugins.context import InterceptorContext, PostprocessContext
from evacore.plugins.manifest import Plugin

Placement = Literal["user_input", "ai_output", "slash_command", "world_info", "reasoning", "prompt"]
ST_PLACEMENTS: dict[int, Placement] = {
    1: "user_input", 2: "ai_output", 3: "slash_command", 5: "world_info", 6: "reasoning",
}
"""SillyTavern's numeric placements (0 = deprecated markdown display and 4 = legacy sendAs are dropped)."""


def _alias(*names: str) -> Any:
    return AliasChoices(*names)


class RegexScript(BaseModel):
    """One script; accepts SillyTavern's exported field names as well as ours."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    id: str = ""
    name: str = Field("", validation_alias=_alias("name", "scriptName"))
    find: str = Field(validation_alias=_alias("find", "findRegex"))
    """`/pattern/flags` (JS flags g, i, m, s, u) or a bare pattern (first match only)."""
    replace: str = Field("", validation_alias=_alias("replace", "replaceString"))
    """`$1`… groups, `$0` / `{{match}}` the whole match; macros are resolved afterwards."""
    trim_strings: list[str] = Field(default_factory=list, validation_alias=_alias("trim_strings", "trimStrings"))
    placement: list[Placement] = Field(default_factory=lambda: ["ai_output"])
    disabled: bool = False
    markdown_only: bool = Field(False, validation_alias=_alias("markdown_only", "markdownOnly"))
    prompt_only: bool = Field(False, validation_alias=_alias("prompt_only", "promptOnly"))
    run_on_edit: bool = Field(False, validation_alias=_alias("run_on_edit", "runOnEdit"))
    substitute_regex: Literal[0, 1, 2] = Field(0, validation_alias=_alias("substitute_regex", "substituteRegex"))
    """Macros in `find`: 0 none, 1 raw, 2 escaped (SillyTavern's substituteRegex)."""
    min_depth: int | None = Field(None, validation_alias=_alias("min_depth", "minDepth"))
    max_depth: int | None = Field(None, validation_alias=_alias("max_depth", "maxDepth"))
    scope: Literal["global", "chat"] = "global"
    chat_ids: list[str] = Field(default_factory=list)
    """With scope "chat": the chats the script applies to."""

    @field_validator("placement", mode="before")
    @classmethod
    def _placements(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        out = []
        for p in value:
            if isinstance(p, bool):
                raise ValueError(f"bad placement {p!r}")  # noqa: TRY004 - pydantic wants ValueError
            if isinstance(p, int):
                if p in ST_PLACEMENTS:
                    out.append(ST_PLACEMENTS[p])
                elif p not in (0, 4):
                    raise ValueError(f"unknown SillyTavern placement {p}")
            else:
                out.append(p)
        return list(dict.fromkeys(out))

    @field_validator("substitute_regex", mode="before")
    @classmethod
    def _substitute(cls, value: Any) -> Any:
        if isinstance(value, bool):  # older SillyTavern exports store a boolean
            return 1 if value else 0
        return value

    @field_validator("min_depth", "max_depth", mode="before")
    @classmethod
    def _depth(cls, value: Any) -> Any:
        if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
            return None
        return value

    @model_validator(mode="after")
    def _pattern_compiles(self) -> RegexScript:
        if not self.find:
            raise ValueError("find must not be empty")
        if self.substitute_regex == 0 and not self.disabled:
            try:
                compile_find(*split_find(self.find))
            except ValueError as exc:
                raise ValueError(f"script {self.name or self.find!r}: {exc}") from None
        return self


class RegexScriptsSettings(BaseModel):
    """Settings of the regex-scripts plugin."""

    scripts: list[RegexScript] = Field(default_factory=list)
    """Scripts in the order they run (SillyTavern script objects are accepted as they are)."""
    regex_timeout: float = Field(0.25, gt=0, le=5)
    """Seconds one non-RE2 pattern may run on one text before it is abandoned."""


def import_sillytavern(data: Any) -> list[RegexScript]:
    """Scripts from a SillyTavern export: one script object, a list, or a card with regex_scripts."""
    if isinstance(data, Mapping):
        card_scripts = (data.get("data") or {}).get("extensions", {}).get("regex_scripts") \
            if isinstance(data.get("data"), Mapping) else None
        if card_scripts is None and isinstance(data.get("extensions"), Mapping):
            card_scripts = data["extensions"].get("regex_scripts")
        items: Iterable[Any] = card_scripts if card_scripts is not None else [data]
    elif isinstance(data, list):
        items = data
    else:
        raise TypeError("expected a SillyTavern regex script object, a list of them, or a card")
    return [RegexScript.model_validate(item) for item in items]


plugin = Plugin(
    name="regex_scripts",
    version="1.0.0",
    settings=RegexScriptsSettings,
    description="SillyTavern-style regex find/replace on user input, AI output and the prompt.",
)

_cache = PatternCache()
_CHAT_KINDS = frozenset({"history", "input"})


def _active(settings: RegexScriptsSettings, chat_id: str | None) -> list[RegexScript]:
    return [s for s in settings.scripts
            if not s.disabled and (s.scope == "global" or (chat_id is not None and chat_id in s.chat_ids))]


def _in_depth(s: RegexScript, depth: int | None) -> bool:
    """SillyTavern's rule: limits apply only where a depth exists; min_depth -1 means no limit."""
    if depth is None:
        return True
    if s.min_depth is not None and s.min_depth >= -1 and depth < s.min_depth:
        return False
    return not (s.max_depth is not None and s.max_depth >= 0 and depth > s.max_depth)


class _Runner:
    """Runs scripts over texts for one hook call; a script that fails or times out once is
    dropped for the rest of the call, so one bad pattern costs at most one time limit."""

    def __init__(self, expand: Callable[[str], str], timeout: float, log: Any) -> None:
        self.expand, self.timeout, self.log = expand, timeout, log
        self.dropped: set[int] = set()

    def __call__(self, scripts: Iterable[RegexScript], text: str) -> str:
        for s in scripts:
            if not text:
                break
            if id(s) in self.dropped:
                continue
            try:
                pattern, flags = split_find(s.find)
                compiled = _cache.get(substitute_find(pattern, s.substitute_regex, self.expand), flags)
                text = replace(compiled, text, s.replace, s.trim_strings, self.expand, self.timeout)
            except (ValueError, RegexTimeout) as exc:
                self.dropped.add(id(s))
                self.log.warning("regex script %r skipped for this tour: %s", s.name or s.find, exc)
        return text


def _is_chat(m: Mapping[str, Any]) -> bool:
    kind = m.get("kind")
    if kind is not None and kind != "other":
        return kind in _CHAT_KINDS
    source = str(m.get("source") or "")
    return source.startswith(("history:", "input"))


def _is_lore(m: Mapping[str, Any]) -> bool:
    return m.get("kind") == "lore" or str(m.get("source") or "").startswith("lore:")


def _scripts_for(m: Mapping[str, Any], depth: int | None, scripts: list[RegexScript]) -> list[RegexScript]:
    """The scripts that apply to one prompt element, in settings order."""
    out = []
    chat, role = _is_chat(m), m.get("role")
    lore = not chat and _is_lore(m)
    for s in scripts:
        if s.markdown_only:
            continue
        if "prompt" in s.placement:
            if _in_depth(s, depth):
                out.append(s)
            continue
        if chat and role == "user" and "user_input" in s.placement:
            # prompt-only scripts work at their depth; unrestricted ones stand in for
            # SillyTavern's edit of the stored message at send time, so every depth.
            if not s.prompt_only or _in_depth(s, depth):
                out.append(s)
        elif chat and role == "assistant" and "ai_output" in s.placement:
            if s.prompt_only and _in_depth(s, depth):
                out.append(s)
        elif lore and "world_info" in s.placement and s.prompt_only and _in_depth(s, depth):
            out.append(s)
    return out


def _depths(messages: list[dict[str, Any]]) -> list[int | None]:
    """Per element: chat messages after it (0 = the newest); None before the chat history."""
    out: list[int | None] = [None] * len(messages)
    after = 0
    first_chat = next((i for i, m in enumerate(messages) if _is_chat(m)), len(messages))
    for i in range(len(messages) - 1, -1, -1):
        if i >= first_chat:
            out[i] = after
        if _is_chat(messages[i]):
            after += 1
    return out


@plugin.interceptor(priority=10, capabilities=["prompt:write"], timeout=2.0)
async def prompt_scripts(ctx: InterceptorContext) -> None:
    """Apply prompt-side scripts to the prompt copy: unprotected elements and the protected
    ones the host lists for scripts (the current input), as SillyTavern's prompt scripts
    leave the system prompt alone."""
    settings: RegexScriptsSettings = ctx.settings
    scripts = [s for s in _active(settings, ctx.chat_id)
               if "prompt" in s.placement or s.prompt_only or "user_input" in s.placement]
    if not scripts:
        return
    messages = ctx.messages
    run = _Runner(ctx.expand_macros, settings.regex_timeout, ctx.log)
    for n, (m, depth) in enumerate(zip(messages, _depths(messages)), 1):
        if n % 32 == 0:
            await asyncio.sleep(0)  # long prompts: let other tours run in between
        if m.get("protected") and m.get("id") not in ctx.script_editable:
            continue
        chosen = _scripts_for(m, depth, scripts)
        if not chosen:
            continue
        content = m.get("content")
        if isinstance(content, str):
            m["content"] = run(chosen, content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                    part["text"] = run(chosen, part["text"])


@plugin.postprocess(priority=10, capabilities=["response:write"], timeout=2.0)
async def output_scripts(ctx: PostprocessContext) -> None:
    """Apply unrestricted AI-output scripts to the final answer, so the saved text is edited."""
    settings: RegexScriptsSettings = ctx.settings
    scripts = [s for s in _active(settings, ctx.chat_id)
               if "ai_output" in s.placement and not s.prompt_only and not s.markdown_only]
    if scripts:
        ctx.text = _Runner(ctx.expand_macros, settings.regex_timeout, ctx.log)(scripts, ctx.text)
