"""The RE2 conditions of the seeded text rules (R6.3, R6.10), built from named parts so each
part can be read and measured on its own.

Must not: compile, match or store anything; `seeds` puts these strings into rules and the
engine runs them. RE2 has no lookaround and no backreferences, so "not inside code" and "not a
description" are said by what a match must consume, never by what it must not see.
"""

from __future__ import annotations

_WS = r"[\s\p{Z}]"
_TAIL = r"↩\x{FE0F}?" + _WS + r"*#\d+"

REPLY_TAIL = _TAIL + _WS + r"*$"
"""The tail `↩ #<id>` at the very end of the answer (trailing spaces allowed)."""

_EMOJI_UNIT = (
    r"(?:[\p{So}\x{1F000}-\x{1FAFF}\x{203C}\x{2049}]"
    r"[\x{FE0E}\x{FE0F}\x{1F3FB}-\x{1F3FF}\x{E0020}-\x{E007F}]*"
    r"|[#*0-9]\x{FE0F}?\x{20E3}|[\x{2194}-\x{2199}\x{2934}\x{2935}\x{3030}\x{303D}]\x{FE0F})"
)
_EMOJI_SEQUENCE = _EMOJI_UNIT + r"(?:\x{200D}" + _EMOJI_UNIT + r")*"
ONLY_EMOJI = "^" + _WS + "*(?:" + _EMOJI_SEQUENCE + _WS + "*)+(?:" + _TAIL + _WS + "*)?$"
"""The whole answer is emoji (symbols, flags, keycaps, with variation selectors, skin tones
and ZWJ joins; arrows and marks outside the symbol class only in emoji form, ↔️ 〰️), optionally
followed by the reply tail."""

# --- Markdown images outside code -----------------------------------------------------------

_MD_PLAIN = r"[^`~\\]|\\(?s:.)|~{1,2}[^`~\\]"
"""A character outside code; a backslash escape (`\\![…]` is no image) and a tilde run too short
for a fence are consumed as units."""
_MD_SPAN_1 = r"`[^`]+`"
_MD_SPAN_2 = r"``(?:[^`]|`[^`])+``"
_MD_FENCE_3 = r"```[^`](?:[^`]|`{1,2}[^`])*`{3,}"
_MD_FENCE_4 = r"`{4,}(?:[^`]|`{1,3}[^`])*`{4,}"
_MD_FENCE_TILDE = r"~{3,}(?:[^~]|~{1,2}[^~])*~{3,}"
_MD_OUTSIDE_CODE = (
    f"(?:{_MD_PLAIN}|{_MD_SPAN_1}|{_MD_SPAN_2}|{_MD_FENCE_3}|{_MD_FENCE_4}|{_MD_FENCE_TILDE})*"
)
"""Text before the image, where every backtick belongs to a whole code span or fenced block:
a backtick is never read as a plain character, so the image cannot be reached inside code."""
_MD_IMAGE = (
    r"!\[[^\]]*\](?:\([^)]*\)|\[[^\]]*\]"
    r"|(?s:.)*\n[ ]{0,3}\[[^\]\n]+\]:[ \t]*\S)"
)
"""`![alt](url)`, reference-style `![alt][ref]` / `![alt][]`, or the shortcut `![alt]` when a
reference definition `[ref]: url` follows on a line of its own."""

MARKDOWN_IMAGE = (
    "^" + _MD_OUTSIDE_CODE + "(?:" + _MD_IMAGE + "|`{1,2}[^`]*" + _MD_IMAGE + "[^`]*$)"
)
"""A Markdown image outside inline code and fenced code blocks. The second branch is a stray
one- or two-backtick run that no later backtick closes (Markdown shows it as a character)."""

# --- "I cannot see the picture" ---------------------------------------------------------------

_SP = r"[\s\pZ]"
_EN_VERB = (
    r"(?:(?:see|view|open|access|process|inspect|read|interpret|load)(?:ing)?|look(?:ing)?\s+at"
    r"|analy[sz](?:e|ing)|perceiv(?:e|ing)|examin(?:e|ing))"
)
_EN_NEG = (
    r"(?:I(?:\s+(?:really|just|simply|actually|honestly|still|sadly))?\s+(?:can(?:.?t|not|\s+not)"
    r"|could(?:n.?t|\s+not)|(?:won.?t|will\s+not)\s+be\s+able\s+to)"
    r"|I(?:\s+am|.?m)\s+(?:unable|not\s+able|(?:in|not\s+)capable\s+of)(?:\s+to)?"
    r"|I\s+(?:don.?t|do\s+not)\s+have\s+(?:the\s+)?(?:ability|capability|capacity|means|tools?)\s+to"
    r"|I\s+lack\s+the\s+(?:ability|capability|means)\s+to|I\s+have\s+no\s+(?:way|ability|means)"
    r"\s+(?:to|of)|it(?:.?s|\s+is)\s+not\s+possible\s+for\s+me\s+to)"
    r"(?:\s+(?:actually|really|directly|currently|visually|personally))?"
    r"(?:(?:,|,?\s+(?:or|and|nor))?\s+" + _EN_VERB + r")+"
)
"""A modal refusal with its verb: "I can't see", "I'm not able to view", "I lack the means to
open", "I cannot see or interpret". Apostrophes are `.?`: straight, curly, or none ("cant")."""
_EN_HEAD = (
    r"(?:" + _EN_NEG + r"|I\s+(?:don.?t|do\s+not)\s+(?:see|have\s+access\s+to)"
    r"|I(?:.?m|\s+am)\s+not\s+seeing|I\s+see\s+no|I\s+have\s+no\s+access\s+to"
    r"|there(?:.?s|\s+is)\s+no)"
)
_EN_DET = (
    r"(?:\s+(?:what(?:.?s|\s+is)\s+(?:in|on|shown\s+in)|the\s+contents?\s+of))?"
    r"(?:\s+(?:the|your|this|that|these|those|any|an?|such))?"
    r"(?:\s+(?:attached|uploaded|shared|sent|provided|actual|embedded|linked))?"
)
_EN_NOUN = (
    r"\s+(?:(?:image|picture|photo(?:graph)?|pic|screenshot|attachment|drawing|illustration"
    r"|visual|graphic)s?|imagery)"
)
_EN_END = (
    r"(?:" + _SP + r"*(?:$|[.,!?;:…)(—–\-]|\p{So})"
    r"|" + _SP + r"+(?:you(?:.?ve|\s+(?:have|sent|shared|attached|uploaded))?|that|which|here"
    r"|there|directly|itself|themselves|at\s+all|because|since|but|or|and|unless|either|too|lol"
    r"|haha|yet|(?:right\s+)?now|sorry|unfortunately|though|just|attached|uploaded|shared|sent"
    r"|provided|(?:for|to)\s+me|(?:that\s+)?I\s+can\s+see|on\s+my\s+(?:end|side)|from\s+(?:here|you|your)|like\s+a\s+human"
    r"|in\s+(?:your|this|the|our|my)\s+(?:message|chat|conversation|post|reply|last))\b)"
)
"""What may follow the picture word in a refusal: the end of the sentence or a word that goes on
with the refusal. "I can't see the picture clearly" and "…well enough" are descriptions."""
_EN_NOUN_FIRST = (
    r"(?:(?:image|picture|photo|attachment|screenshot)s?\s+(?:(?:(?:is|are)\s+(?:not\s+)?in"
    r"|(?:is|are)\s+not\s+|isn.?t\s+|aren.?t\s+)(?:visible|available|accessible|showing)"
    r"\s+(?:to\s+me|on\s+my\s+end|for\s+me)"
    r"|(?:didn.?t|did\s+not|doesn.?t|does\s+not|don.?t|do\s+not)\s+(?:seem\s+to\s+)?"
    r"(?:come\s+through|load|show\s+up|open)))"
)
"""'The image isn't visible to me', 'the photo didn't come through'."""
_EN_REFUSAL = r"\b(?:" + _EN_HEAD + _EN_DET + _EN_NOUN + r"|" + _EN_NOUN_FIRST + r")" + _EN_END

_L = "[а-яё]"
"""A Russian letter (with `(?i)` also a capital); `\\p{L}` would cost the program 1200 steps."""
_RU_NEG = (
    r"(?:не\s+(?:могу|смогу|в\s+состоянии|способ(?:ен|на|ны)|умею|сумею|имею\s+возможности)"
    r"|нет\s+(?:возможности|способности)|лиш[её]н[аы]?\s+возможности"
    r"|(?:^|[.!?,:;…\n]\s*|у\s+меня\s+|мне\s+)не\s+(?:получается|удаётся|удается|дано))"
    r"(?:,?\s+(?:сейчас|здесь|тут|никак|к\s+сожалению|просто|пока|самостоятельно|увы|сама?"
    r"|по-настоящему|напрямую|физически),?)*"
    r"(?:[\s,]+(?:или\s+|и\s+)?(?:у?видеть|посмотреть|смотреть|просм(?:отреть|атривать)|рассм(?:отреть|атривать)"
    r"|разглядеть|откр(?:ыть|ывать)|прочитать|прочесть|(?:про)?анализировать|распозна(?:ть|вать)"
    r"|восприн(?:имать|ять)|обраб(?:отать|атывать)|описать))+"
)
"""A Russian modal refusal with its verb: «не могу посмотреть», «не умею видеть»."""
_RU_DET = (
    r"(?:,?\s+(?:ваш\S*|тво\S*|эт[аоиу]|этих|этой|этого|присланн\S*|прикрепл[её]нн\S*"
    r"|отправленн\S*|загруженн\S*|никак\S*|ни\s+одн\S*|что\s+(?:изображено\s+)?на|содержимое"
    r"|в\s+(?:\S+\s+)?сообщении|на|здесь|тут|какие-(?:либо|то)|любые|сам[иоу]?))*"
)
_RU_NOUN = (
    r"\s+(?:изображени|картин|фот|снимк|снимок|скриншот|рисун|вложени|иллюстраци|аттач|пикч)"
    + _L + "*"
)
_RU_END = (
    r"(?:" + _SP + r"*(?:$|[.,!?;:…)(—–\-«»\"]|\p{So})"
    r"|" + _SP + r"+(?:у\s+меня|мне|здесь|тут|сейчас|никак|совсем|вообще|к\s+сожалению|увы"
    r"|почему-то|пока|напрямую|и|но|а|поэтому|так\s+что|котор" + _L + r"*|(?:что\s+)?(?:вы|ты)"
    r"|от\s+(?:вас|тебя)|(?:присланн|прикрепл|отправленн)" + _L + r"*"
    r"|в\s+(?:" + _L + r"+\s+)?(?:сообщени|чат|переписк|диалог)" + _L + r"*)(?:$|[^а-яёa-z-]))"
)
"""What may follow the picture word in a Russian refusal. «не могу рассмотреть фото подробно» and
«на фото я не вижу людей» describe the picture: their next word is not on the list."""
_RU_NOUN_FIRST = (
    r"(?:^|[.!?…:;\n(«\"—–,-]" + _SP + r"*|" + _SP + r"(?:а|но|и|же|эт[уои]|этот|ваш" + _L
    + r"*|тво" + _L + r"*|присланн" + _L + r"*|прикрепл" + _L + r"*|сам[оу])" + _SP + r"+)"
    r"(?:картин|изображени|фот|снимк|снимок|скриншот|вложени|рисун)" + _L + r"*"
    r"(?:,?\s+(?:я|мне|у\s+меня|к\s+сожалению|увы|пока|почему-то),?)*"
    r"\s+(?:не\s+вижу|не\s+вид(?:но|на|ен|ны)|не\s*доступ" + _L + r"*"
    r"|не\s+(?:откр(?:ывается|ываются|ылось|ылась|ылся)|(?:за|про)гру(?:зил|жае)" + _L + r"*"
    r"|отобра(?:жается|зил" + _L + r"*)|показывается|дош(?:л" + _L + r"*|[её]л)|пришл" + _L + r"*))"
)
"""«Картинку я не вижу», «фото не загрузилось»: the picture word opens the clause (not «на фото…»)."""
_RU_REFUSAL = (
    r"(?:(?:" + _RU_NEG + r"|не\s+вижу|мне\s+не\s+вид(?:но|на|ен|ны)|у\s+меня\s+нет\s+доступа\s+к)"
    + _RU_DET + _RU_NOUN + r"|" + _RU_NOUN_FIRST + r")" + _RU_END
)

CANNOT_SEE_PICTURE = "(?i)(?:" + _EN_REFUSAL + "|" + _RU_REFUSAL + ")"
"""English and Russian "I can't see / look at / open the picture" phrasings (case-insensitive),
and not the descriptions that share their words ("I can't see the picture clearly", «на фото я
не вижу людей»)."""
