"""The six seeded stream rules (R6.10): their texts, RE2 conditions, version and text hashes,
and the corpora of texts each must catch and must let pass.

Must not: write anything; `calibration.plan_seeding` decides what a wave writes.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from importlib import resources
from typing import Any

from evacore.rules.model import Rule, content_hash

SEED_VERSION = 1
"""Bump when any seeded field below changes; a calibration wave then rewrites untouched rules."""

_WS = r"[\s\p{Z}]"
_TAIL = r"↩\x{FE0F}?" + _WS + r"*#\d+"

REPLY_TAIL = _TAIL + _WS + r"*$"
"""The tail `↩ #<id>` at the very end of the answer (trailing spaces allowed)."""

_EMOJI_UNIT = (
    r"(?:[\p{So}\x{1F000}-\x{1FAFF}\x{203C}\x{2049}]"
    r"[\x{FE0E}\x{FE0F}\x{1F3FB}-\x{1F3FF}\x{E0020}-\x{E007F}]*"
    r"|[#*0-9]\x{FE0F}?\x{20E3})"
)
_EMOJI_SEQUENCE = _EMOJI_UNIT + r"(?:\x{200D}" + _EMOJI_UNIT + r")*"
ONLY_EMOJI = "^" + _WS + "*(?:" + _EMOJI_SEQUENCE + _WS + "*)+(?:" + _TAIL + _WS + "*)?$"
"""The whole answer is emoji (symbols, flags, keycaps, with variation selectors, skin tones
and ZWJ joins), optionally followed by the reply tail."""

MARKDOWN_IMAGE = r"!\[[^\]]*\]\([^)]*\)"

_AP = "['’]"
_EN_NEG = (
    r"(?:I\s+(?:can(?:" + _AP + r"?t|not|\s+not)|could(?:n" + _AP + r"?t|\s+not))"
    r"|I(?:\s+am|" + _AP + r"m)\s+(?:unable|not\s+able)\s+to"
    r"|I\s+(?:don" + _AP + r"?t|do\s+not)\s+have\s+(?:the\s+)?"
    r"(?:ability|capability|capacity|means|option)\s+to"
    r"|I\s+have\s+no\s+(?:way|ability|means)\s+(?:to|of))"
)
_EN_VERB = (
    r"(?:\s+(?:actually|really|directly|currently|visually))?\s+"
    r"(?:see(?:ing)?|view(?:ing)?|look(?:ing)?\s+at|open(?:ing)?|access(?:ing)?|analy[sz](?:e|ing)"
    r"|process(?:ing)?|perceiv(?:e|ing)|examin(?:e|ing)|inspect(?:ing)?|make\s+out|read(?:ing)?)"
)
_EN_ADJ = r"(?:\s+(?:attached|uploaded|shared|sent|provided))?"
_EN_OBJECT = (
    r"(?:\s+(?:what" + _AP + r"?s\s+in|what\s+is\s+(?:in|on|shown\s+in)|the\s+contents?\s+of"
    r"|anything\s+(?:in|on)))?"
    r"(?:\s+(?:the|your|this|that|these|those|any|an?))?" + _EN_ADJ
)
_EN_NOUN = (
    r"\s+(?:image|picture|photo(?:graph)?|pic|screenshot|attachment|drawing|illustration|visual)"
    r"s?\b"
)
_EN_DONT_SEE = (
    r"I\s+(?:don"
    + _AP
    + r"?t|do\s+not)\s+see\s+(?:the|your|this|that|any|an?)"
    + _EN_ADJ
    + _EN_NOUN
)
_EN_INVISIBLE = (
    r"(?:image|picture|photo|attachment)s?\s+(?:is|are|isn" + _AP + r"t|aren" + _AP + r"t)"
    r"\s+(?:not\s+)?visible\s+to\s+me"
)
_RU_NEG = (
    r"(?:не\s+(?:могу|смогу|в\s+состоянии|способ(?:ен|на|ны))|нет\s+возможности"
    r"|не\s+имею\s+возможности"
    r"|(?:^|[.!?,:;…\n]\s*|у\s+меня\s+|мне\s+)не\s+(?:получается|удаётся|удается))"
)
_RU_ADVERB = (
    r"(?:\s+(?:сейчас|здесь|тут|никак|к\s+сожалению|просто|пока|самостоятельно|увы|сама|сам))*"
)
_RU_VERB = (
    r"\s+(?:увидеть|видеть|посмотреть|смотреть|просмотреть|просматривать|рассмотреть|разглядеть"
    r"|открыть|открывать|прочитать|прочесть|проанализировать|анализировать|распознать)"
)
_RU_OBJECT = (
    r"(?:,?\s+(?:ваш\S*|тво\S*|эт[аоиу]|этих|этой|этого|присланн\S*|прикрепл[её]нн\S*"
    r"|отправленн\S*|загруженн\S*|никак\S*|ни\s+одн\S*|что\s+на|что\s+изображено\s+на|содержимое"
    r"|в\s+(?:вашем\s+|твоём\s+|твоем\s+|этом\s+)?сообщении|здесь|тут))*"
)
_RU_NOUN = r"\s+(?:изображени|картин|фото|снимк|снимок|скриншот|рисун|вложени|иллюстраци)"
_RU_NOUN_FIRST = (
    r"(?:картинк|изображени|фото|снимк|снимок|скриншот|вложени)\S*\s+"
    r"(?:(?:я\s+)?не\s+вижу|мне\s+не\s+(?:вид(?:но|на|ен|ны)|доступн\S*)|мне\s+недоступн\S*)"
)
CANNOT_SEE_PICTURE = (
    "(?i)(?:\\b(?:"
    + _EN_NEG
    + _EN_VERB
    + _EN_OBJECT
    + _EN_NOUN
    + "|"
    + _EN_DONT_SEE
    + "|"
    + _EN_INVISIBLE
    + ")"
    + "|"
    + _RU_NEG
    + _RU_ADVERB
    + _RU_VERB
    + _RU_OBJECT
    + _RU_NOUN
    + "|не\\s+вижу"
    + _RU_OBJECT
    + _RU_NOUN
    + "|"
    + _RU_NOUN_FIRST
    + ")"
)
"""English and Russian "I can't see / look at / open the picture" phrasings (case-insensitive)."""


def _seed(**fields: Any) -> Rule:
    rule = Rule(**fields)
    return dataclasses.replace(rule, seed_version=SEED_VERSION, seed_hash=content_hash(rule))


SEEDS: tuple[Rule, ...] = (
    _seed(
        name="write_diff_over_write_file",
        scope="tool:write_file",
        repeat="after:3",
        text=(
            "write_file replaces the whole file. If this file already existed, the edit should "
            "have gone through write_diff: a diff changes only the lines you mean to change and "
            "cannot silently drop the rest. Keep write_file for new files and deliberate full "
            "rewrites."
        ),
    ),
    _seed(
        name="local_shell_for_his_machine",
        scope="tool:shell",
        when=("client_ops",),
        text=(
            "shell runs on the core's own server, not on the master's computer. In this "
            "conversation his machine is reachable only through the client operations offered "
            "to you as tools. If this command was meant for his machine, run it again through "
            "those."
        ),
    ),
    _seed(
        name="telegram_markdown_image",
        scope="text",
        condition=MARKDOWN_IMAGE,
        when=("telegram",),
        text=(
            "Telegram does not render Markdown images: ![...](...) reaches the person as "
            "brackets and a bare URL. Put the link on a line of its own, or describe the "
            "picture in words."
        ),
    ),
    _seed(
        name="telegram_reply_tail",
        scope="text",
        condition=REPLY_TAIL,
        negate=True,
        when=("telegram",),
        text=(
            "Every Telegram answer ends with the reply tail ↩ #<id>, where <id> is the number "
            "of the message you are answering (incoming messages are shown with their #id). "
            "Put the tail at the very end; it is removed before the message is sent."
        ),
    ),
    _seed(
        name="look_before_refusing",
        scope="text",
        condition=CANNOT_SEE_PICTURE,
        when=("picture",),
        text=(
            "The picture is in this conversation and you can see it: it is part of your input. "
            "Do not say you cannot see, open or look at images. Look at it and answer about "
            "what it actually shows."
        ),
    ),
    _seed(
        name="telegram_react_not_emoji",
        scope="text",
        condition=ONLY_EMOJI,
        when=("telegram",),
        text=(
            "An answer made only of emoji is a reaction in disguise. To react to a message in "
            "Telegram, call the telegram_react tool; write an answer only when you have words "
            "to say."
        ),
    ),
)
"""The seeded rules, each with `seed_version` and `seed_hash` set (timestamps are not)."""


def seed_rules() -> tuple[Rule, ...]:
    return SEEDS


@cache
def load_corpus(name: str) -> dict[str, Any]:
    """The corpus of a seeded rule: {"rule", "catch": [...], "pass": [...]}; an entry is a
    text (text rules) or {"tool", "arguments"} (tool rules), either with an optional "env"."""
    path = resources.files("evacore.rules") / "corpora" / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))
