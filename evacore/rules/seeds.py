"""The six seeded stream rules (R6.10): their texts, conditions (from `patterns`), version and
text hashes. Each ships with a corpus in `corpora/<name>.jsonl` (read by `corpus`).

Must not: write anything; `calibration.plan_seeding` decides what a wave writes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from evacore.rules.model import Rule, content_hash
from evacore.rules.patterns import CANNOT_SEE_PICTURE, MARKDOWN_IMAGE, ONLY_EMOJI, REPLY_TAIL

SEED_VERSION = 2
"""Bump when any seeded field below changes; a calibration wave then rewrites untouched rules.
1: the first seeding. 2: Markdown images outside code and reference-style images, a wider and
more precise refusal pattern («не умею», descriptions excluded), ↔️ 〰️ as emoji."""

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
            "Telegram does not render Markdown images: ![alt](url) and ![alt][ref] reach the "
            "person as brackets and a bare URL, not as a picture. Put the link on a line of its "
            "own, or describe the picture in words. Image syntax inside `code` or a fenced code "
            "block is fine: it is shown as code."
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
            "The picture is in this conversation and you can see it: it reaches you as part of "
            "your input, not as a file you would have to open. Saying you cannot see, open or "
            "look at it is untrue here and leaves the person without an answer. Look at it and "
            "answer about what it actually shows; if a detail is unclear, say which one."
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
