"""The chat-mode prompt shape SillyTavern's chat-completion builder gives: its default texts,
example dialogues as `[Example Chat]` blocks of named turns, in-chat injections grouped per
(depth, role), and the elements joined into the messages a chat connection is sent.

Must not: read storage or decide what fits the budget. Elements stay separate in the prompt
(each keeps its id, its tokens and its own removal by stage 7); joining happens only when
the prompt becomes messages (`prompt_messages`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from evacore.prompt.elements import Element, Prompt

# SillyTavern's chat-completion defaults (openai.js); each is a connection param of that name.
DEFAULTS: dict[str, str] = {
    "personality_format": "[{{char}}'s personality: {{personality}}]",
    "scenario_format": "[Circumstances and context of the dialogue: {{scenario}}]",
    "wi_format": "{0}",
    "new_chat_prompt": "[Start a new Chat]",
    "new_example_chat_prompt": "[Example Chat]",
    "continue_nudge_prompt": (
        "[Continue the following message. Do not include ANY parts of the original message. "
        "Use capitalization and punctuation as if your reply is a part of the original "
        "message: {{lastChatMessage}}]"
    ),
}
CONTINUE_POSTFIX = " "
"""SillyTavern's default `continue_postfix` (a space)."""
ROLE_RANK = {"assistant": 0, "user": 1, "system": 2}
"""Within one depth the assistant group comes first and the system group last (SillyTavern
puts the most important closest to the end)."""
# SillyTavern joins extension prompts of one (depth, role) sorted by their key: summary
# (`1_memory`), author's note (`2_floating_prompt`), character's note (`DEPTH_PROMPT`),
# World Info (`customDepthWI…`).
KEY_AUTHORS_NOTE = "2_floating_prompt"
KEY_CHARACTER_NOTE = "DEPTH_PROMPT"
KEY_LORE = "customDepthWI"
_LAST_CHAT_MESSAGE = re.compile(r"\{\{lastChatMessage\}\}", re.IGNORECASE)


def setting(params: Mapping[str, Any], key: str) -> str:
    """A chat-completion text of the connection's params, else SillyTavern's default."""
    value = params.get(key)
    return value if isinstance(value, str) else DEFAULTS[key]


def with_last_chat_message(text: str, message: str) -> str:
    return _LAST_CHAT_MESSAGE.sub(lambda _m: message.strip(), text)


# -- example dialogues ---------------------------------------------------------------------


def example_turns(block: str, user: str, char: str) -> list[tuple[str, str]]:
    """A block's turns as SillyTavern parses them for chat completion: a line starting
    `{user}:` or `{char}:` opens a turn, following lines belong to it, the first `Name:` is
    removed and the text trimmed; lines before the first speaker go with the first turn.
    Returns `(example_user | example_assistant, text)`; a block without speakers gives none."""
    turns: list[tuple[str, str]] = []
    lines: list[str] = []
    speaker = ""
    for line in block.replace("\r", "").split("\n"):
        now = ""
        if user and line.startswith(f"{user}:"):
            now = "user"
        elif char and line.startswith(f"{char}:"):
            now = "char"
        if now and speaker and now != speaker:
            turns.append(_turn(speaker, lines, user, char))
            lines = []
        if now:
            speaker = now
        lines.append(line)
    if speaker:
        turns.append(_turn(speaker, lines, user, char))
    return turns


def _turn(speaker: str, lines: list[str], user: str, char: str) -> tuple[str, str]:
    name = user if speaker == "user" else char
    text = "\n".join(lines).replace(f"{name}:", "", 1).strip()
    return ("example_user" if speaker == "user" else "example_assistant", text)


def example_elements(base_id: str, block: str, *, header: str, user: str, char: str,
                     source: str, priority: int, meta: dict[str, Any] | None = None
                     ) -> list[Element]:
    """One example block as a group of system elements that leave together: the header
    (`[Example Chat]`, carrying the raw block for text mode) and one named element per turn.
    A block without turns gives no elements (SillyTavern drops its header too)."""
    turns = example_turns(block, user, char)
    if not turns:
        return []
    extra = dict(meta or {})
    out = [Element(id=base_id, role="system", content=header, source=source, kind="examples",
                   priority=priority, group=base_id, meta={**extra, "block": block})]
    for j, (name, text) in enumerate(turns):
        out.append(Element(id=f"{base_id}:{j}", role="system", content=text, source=source,
                           kind="examples", priority=priority, group=base_id, name=name,
                           meta={**extra, "example_turn": True}))
    return out


# -- in-chat injections --------------------------------------------------------------------


def insert_injection(prompt: Prompt, el: Element, depth: int, *, key: str) -> Element:
    """Insert `el` `depth` history messages from the end, among the injections already
    there in SillyTavern's order: deeper first, then assistant, user, system groups, then
    by key. Elements of one (depth, role) are joined into one message when sent."""
    depth = max(0, int(depth))
    el.meta.update(inject={"depth": depth, "key": key}, join=f"depth:{depth}:{el.role}")
    index = prompt.depth_index(depth)
    elements = prompt.elements
    start, end = index, index
    while start > 0 and "inject" in elements[start - 1].meta:
        start -= 1
    while end < len(elements) and "inject" in elements[end].meta:
        end += 1
    rank = _rank(el)
    target = next((j for j in range(start, end) if _rank(elements[j]) > rank), end)
    return prompt.insert(target, el)


def _rank(el: Element) -> tuple[int, int, str]:
    inject = el.meta["inject"]
    return (-int(inject["depth"]), ROLE_RANK.get(el.role, 2), str(inject["key"]))


# -- messages ------------------------------------------------------------------------------


def prompt_messages(elements: Iterable[Element], params: Mapping[str, Any]
                    ) -> list[dict[str, Any]]:
    """The prompt as OpenAI-format messages: empty non-history elements left out, and
    neighbours sharing a join key sent as one message — World Info before / after joined
    by `\\n` and wrapped in `wi_format`, each in-chat (depth, role) group joined by `\\n`."""
    out: list[dict[str, Any]] = []
    joined: list[str] = []
    join_key: str | None = None
    wi_format = setting(params, "wi_format")

    def flush() -> None:
        nonlocal join_key
        if join_key is not None and joined:
            text = "\n".join(joined)
            if join_key in ("wi_before", "wi_after") and wi_format.strip():
                text = wi_format.replace("{0}", text)
            out[-1]["content"] = text
        joined.clear()
        join_key = None

    for el in elements:
        if el.kind not in ("history", "input") and not el.text.strip() and not el.tool_calls:
            continue
        key = el.meta.get("join")
        if key is not None and key == join_key and out and out[-1]["role"] == el.role:
            joined.append(_join_text(el))
            continue
        if join_key is not None:
            flush()
        out.append(el.to_message())
        if key is not None and isinstance(el.content, str):
            join_key = key
            joined.append(_join_text(el))
    flush()
    return out


def _join_text(el: Element) -> str:
    return el.text.strip() if "inject" in el.meta else el.text
