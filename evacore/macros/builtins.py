"""SillyTavern's built-in macros: names, card fields, chat facts, randomness, utilities.

Must not: read anything but the `MacroEnv` it is given (no storage, no clock, no globals).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from evacore.macros.env import MacroEnv
from evacore.macros.timefmt import register_time
from evacore.macros.variables import register_variables

if TYPE_CHECKING:
    from evacore.macros.engine import MacroCall, MacroEngine

MAX_DICE = 1000
"""Largest dice count `{{roll}}` accepts (a larger formula gives '')."""

_DICE = re.compile(r"(\d*)d(\d+)(?:([+-])(\d+))?")
_UNESCAPED_COMMA = re.compile(r"(?<!\\),")


def _opt_int(value: int | None) -> str:
    return "" if value is None else str(value)


def _group(env: MacroEnv) -> str:
    return ", ".join(env.group_members) if env.group_members else env.char


def _group_not_muted(env: MacroEnv) -> str:
    if not env.group_members:
        return env.char
    return ", ".join(m for m in env.group_members if m not in env.muted_members)


def _not_char(env: MacroEnv) -> str:
    others = [m for m in (env.group_members or []) if m != env.char]
    return ", ".join([*others, env.user] if env.user != env.char else others)


def choice_list(args: tuple[str, ...]) -> list[str]:
    """Items of `{{random::a::b}}` (split on `::`) or `{{random:a,b}}` (commas, `\\,` literal)."""
    if len(args) > 1:
        return [a.strip() for a in args]
    if not args:
        return []
    return [item.strip().replace("\\,", ",") for item in _UNESCAPED_COMMA.split(args[0])]


def _random(env: MacroEnv, *args: str) -> str:
    items = choice_list(args)
    return env.rng.choice(items) if items else ""


def _pick(env: MacroEnv, call: MacroCall, *args: str) -> str:
    """Stable for the same chat, the same text and the same position in it."""
    items = choice_list(args)
    if not items:
        return ""
    seed = hashlib.blake2b(
        f"{env.chat_id}\x00{call.offset}\x00{call.source}".encode(), digest_size=8
    ).digest()
    return items[int.from_bytes(seed, "big") % len(items)]


def roll(env: MacroEnv, formula: str) -> str:
    """`NdS±M`; a bare number N means `1dN`; an invalid formula gives ''."""
    text = re.sub(r"\s+", "", formula).lower()
    if text.isdigit():
        text = "1d" + text
    match = _DICE.fullmatch(text)
    if match is None:
        return ""
    count = int(match.group(1) or 1)
    sides = int(match.group(2))
    if count < 1 or sides < 1 or count > MAX_DICE:
        return ""
    total = sum(env.rng.randint(1, sides) for _ in range(count))
    if match.group(3):
        modifier = int(match.group(4))
        total += modifier if match.group(3) == "+" else -modifier
    return str(total)


def _original(env: MacroEnv, call: MacroCall) -> str:
    if call.state.get("original_used"):
        return ""
    call.state["original_used"] = True
    return env.original


def _banned(env: MacroEnv, word: str) -> str:
    word = word.strip()
    if len(word) >= 2 and word[0] == word[-1] == '"':
        word = word[1:-1]
    if word:
        env.banned.append(word)
    return ""


def _greeting(env: MacroEnv, index: str = "0") -> str:
    try:
        i = int(index.strip() or "0")
    except ValueError:
        return ""
    return env.greetings[i] if 0 <= i < len(env.greetings) else ""


def _repeat(char: str) -> Callable[..., str]:
    def repeat(env: MacroEnv, count: str = "1") -> str:
        try:
            n = int(count.strip() or "1")
        except ValueError:
            return ""
        return char * max(0, min(n, 1000))

    return repeat


# instruct/context preset key for each template macro (SillyTavern names)
INSTRUCT_MACROS: dict[str, tuple[str, tuple[str, ...]]] = {
    "instructInput": ("input_sequence", ("instructUserPrefix",)),
    "instructUserSuffix": ("input_suffix", ()),
    "instructOutput": ("output_sequence", ("instructAssistantPrefix",)),
    "instructSeparator": ("output_suffix", ("instructAssistantSuffix",)),
    "instructSystemPrefix": ("system_sequence", ()),
    "instructSystemSuffix": ("system_suffix", ()),
    "instructFirstOutput": ("first_output_sequence", ("instructFirstAssistantPrefix",)),
    "instructLastOutput": ("last_output_sequence", ("instructLastAssistantPrefix",)),
    "instructFirstInput": ("first_input_sequence", ("instructFirstUserPrefix",)),
    "instructLastInput": ("last_input_sequence", ("instructLastUserPrefix",)),
    "instructStop": ("stop_sequence", ()),
    "instructUserFiller": ("user_alignment_message", ()),
    "instructSystemInstructionPrefix": ("last_system_sequence", ()),
    "instructStoryStringPrefix": ("story_string_prefix", ("instructSystemPromptPrefix",)),
    "instructStoryStringSuffix": ("story_string_suffix", ("instructSystemPromptSuffix",)),
    "chatStart": ("chat_start", ()),
    "chatSeparator": ("example_separator", ("exampleSeparator",)),
}


def _field(attr: str) -> Callable[[MacroEnv], str]:
    return lambda env: str(getattr(env, attr))


# name -> (env attribute, aliases, description); inserted text is macro-expanded
CARD_FIELDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "description": ("description", ("charDescription",), "Character description."),
    "personality": ("personality", ("charPersonality",), "Character personality."),
    "scenario": ("scenario", ("charScenario",), "Scenario (a chat override wins)."),
    "persona": ("persona", ("personaDescription",), "Active persona's description."),
    "mesExamples": ("mes_examples", (), "Example dialogues, formatted for the prompt."),
    "mesExamplesRaw": ("mes_examples_raw", (), "Example dialogues as written on the card."),
    "systemPrompt": ("system_prompt", ("system",), "Effective system prompt."),
    "defaultSystemPrompt": ("default_system_prompt", ("instructSystem",),
                            "The preset's default system prompt."),
    "charPrompt": ("char_prompt", (), "Card system prompt (when the card's is preferred)."),
    "charInstruction": ("char_instruction", ("charJailbreak",),
                        "Card post-history instructions (when preferred)."),
    "charDepthPrompt": ("char_depth_prompt", (), "Card depth prompt."),
    "creatorNotes": ("creator_notes", (), "Card creator notes."),
}


def register_builtins(engine: MacroEngine) -> None:
    reg = engine.register
    # names
    reg("user", _field("user"), max_args=0, description="Active persona name.")
    reg("char", _field("char"), max_args=0, description="Character name.")
    reg("group", _group, max_args=0, aliases=("charIfNotGroup",),
        description="Group members joined with ', ', or the character name outside a group.")
    reg("groupNotMuted", _group_not_muted, max_args=0,
        description="Unmuted group members, or the character name outside a group.")
    reg("notChar", _not_char, max_args=0,
        description="Everyone in the chat except the character, joined with ', '.")
    reg("model", _field("model"), max_args=0, description="Model name of the connection.")
    # card fields
    for name, (attr, aliases, description) in CARD_FIELDS.items():
        reg(name, _field(attr), max_args=0, aliases=aliases, expand_result=True,
            description=description)
    reg("charVersion", _field("char_version"), max_args=0, aliases=("char_version",),
        description="Card version.")
    reg("greeting", _greeting, max_args=1, expand_result=True,
        description="Greeting i (0 = first message, then alternate greetings).")
    reg("original", _original, max_args=0, wants_call=True, expand_result=True,
        description="The overridden default prompt; only the first occurrence expands.")
    # chat facts
    reg("lastMessage", _field("last_message"), max_args=0, description="Last chat message.")
    reg("lastUserMessage", _field("last_user_message"), max_args=0,
        description="Last user message.")
    reg("lastCharMessage", _field("last_char_message"), max_args=0,
        description="Last character message.")
    reg("lastMessageId", lambda env: _opt_int(env.last_message_id), max_args=0,
        description="Index of the last message.")
    reg("firstIncludedMessageId", lambda env: _opt_int(env.first_included_message_id),
        max_args=0, description="Index of the first message kept in the prompt.")
    reg("lastSwipeId", lambda env: _opt_int(env.last_swipe_id), max_args=0,
        description="Number of variants of the last message.")
    reg("currentSwipeId", lambda env: _opt_int(env.current_swipe_id), max_args=0,
        description="1-based active variant of the last message.")
    reg("input", _field("input"), max_args=0, description="The user's current input.")
    reg("maxPrompt", lambda env: _opt_int(env.max_prompt), max_args=0,
        description="Prompt token budget.")
    reg("maxContext", lambda env: _opt_int(env.max_context), max_args=0,
        description="Context size in tokens.")
    reg("maxResponse", lambda env: _opt_int(env.max_response), max_args=0,
        description="Reserved response tokens.")
    reg("lastGenerationType", _field("generation_type"), max_args=0,
        description="Mode of this tour (normal, regenerate, swipe, continue, …).")
    # randomness
    reg("random", _random, description="A random item: `::a::b` or `:a,b` (`\\,` is a comma).")
    reg("pick", _pick, wants_call=True,
        description="Like random, but stable for the same chat, text and position.")
    reg("roll", roll, min_args=1, max_args=1, description="Dice roll: `d20`, `2d6+1`, `6` (=1d6).")
    # utilities
    from evacore.macros.engine import TRIM_MARK

    reg("newline", _repeat("\n"), max_args=1, description="A newline (`::N` for N of them).")
    reg("space", _repeat(" "), max_args=1, description="A space (`::N` for N of them).")
    reg("trim", lambda env: TRIM_MARK, max_args=0,
        description="Removes itself and the newlines around it.")
    reg("noop", lambda env: "", max_args=0, description="Nothing.")
    reg("//", lambda env: "", lazy=True, description="A comment; removed, never evaluated.")
    reg("reverse", lambda env, text: text[::-1], min_args=1, max_args=1,
        description="The argument reversed by code point.")
    reg("banned", _banned, min_args=1, max_args=1,
        description='Removed from the text; the word is added to `env.banned`.')
    reg("outlet", lambda env, name: env.outlets.get(name.strip(), ""), min_args=1, max_args=1,
        expand_result=True, description="Lorebook entries sent to the named outlet.")
    for name, (key, aliases) in INSTRUCT_MACROS.items():
        reg(name, _instruct(key), max_args=0, aliases=aliases,
            description=f"Instruct/context template field `{key}` ('' when off).")
    register_variables(engine)
    register_time(engine)


def _instruct(key: str) -> Callable[[MacroEnv], str]:
    return lambda env: env.instruct.get(key, "")
