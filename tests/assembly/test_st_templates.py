"""Instruct, context, system-prompt presets and chat templates reach the text a text-mode
connection sends, as SillyTavern uses them: imported presets (the fixture files), the
`activation_regex` auto-select, a Jinja chat template, the story-string migration between
preset generations, and an unknown post-processing mode passing the messages through."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import update

from evacore.core import Core
from evacore.store.tables import Connection
from tests.assembly._helpers import chat, connection, send, sent_body
from tests.helpers import FIXTURES

PRESETS = FIXTURES / "presets"


async def _import(client: httpx.AsyncClient, path: str) -> dict[str, Any]:
    data = (PRESETS / path).read_bytes()
    r = await client.post("/v1/presets/import", files={"file": (path.split("/")[-1], data,
                                                                 "application/json")})
    assert r.status_code == 201, r.text
    return dict(r.json()["presets"][0])


async def _text_prompt(client: httpx.AsyncClient, fake: Any, text: str = "Hello",
                       **conn: Any) -> str:
    conn.setdefault("model", "fake-model")
    conn_id = await connection(client, "openai-text", base_url=fake.base_url, api_key="k",
                               **conn)
    fake.script.reply("ok")
    answer = await send(client, await chat(client, conn_id), text)
    return str((await sent_body(client, answer["tour_id"]))["prompt"])


async def test_a_jinja_chat_template_on_a_connection_renders_the_prompt(
    client: httpx.AsyncClient, openai_text_fake: Any,
) -> None:
    template = ("{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>"
                "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    prompt = await _text_prompt(client, openai_text_fake, instruct={
        "chat_template": template, "bos_token": "<s>", "eos_token": "</s>"})
    assert prompt.startswith("<s><system>Write Assistant's next reply")
    assert prompt.endswith("<user>Hello</s><assistant>")
    assert "</s>" in openai_text_fake.last_body["stop"]
    # a template that cannot render is refused when the connection is made
    r = await client.post("/v1/connections", json={
        "name": "bad", "kind": "openai-text", "base_url": openai_text_fake.base_url,
        "instruct": {"chat_template": "{% for %}"}})
    assert r.status_code == 422, r.text


async def test_an_imported_sysprompt_preset_is_the_default_system_prompt(
    client: httpx.AsyncClient, openai_text_fake: Any,
) -> None:
    preset = await _import(client, "newer/sysprompt-Roleplay-Detailed.json")
    prompt = await _text_prompt(client, openai_text_fake, instruct={
        "preset": "ChatML", "sysprompt": preset["name"]})
    assert prompt.startswith("<|im_start|>system\nDevelop the plot slowly, always stay in "
                             "character.")
    assert "Write Assistant's next reply" not in prompt
    r = await client.post("/v1/connections", json={
        "name": "x", "kind": "openai-text", "base_url": openai_text_fake.base_url,
        "instruct": {"sysprompt": 3}})
    assert r.status_code == 422, r.text


async def test_activation_regex_selects_the_instruct_preset_for_the_model(
    client: httpx.AsyncClient, openai_text_fake: Any,
) -> None:
    r = await client.post("/v1/presets", json={"kind": "instruct", "name": "Bracket", "data": {
        "name": "Bracket", "input_sequence": "[U]", "output_sequence": "[A]",
        "system_sequence": "[S]", "wrap": True, "activation_regex": "^bracket-\\d+b$"}})
    assert r.status_code == 201, r.text
    prompt = await _text_prompt(client, openai_text_fake, model="bracket-7b")
    assert prompt.endswith("[U]\nHello\n[A]\n")
    # a model the pattern does not match keeps the guess from its name (ChatML)
    prompt = await _text_prompt(client, openai_text_fake, model="other-7b")
    assert "<|im_start|>user" in prompt


async def test_a_1_12_context_with_a_newer_instruct_preset_gives_the_system_token_once(
    client: httpx.AsyncClient, openai_text_fake: Any,
) -> None:
    await _import(client, "context/ChatML.json")          # 1.12: tokens in the story string
    await _import(client, "newer/instruct-ChatML.json")   # newer: story_string_prefix/suffix
    prompt = await _text_prompt(client, openai_text_fake, instruct="ChatML")
    assert prompt.count("<|im_start|>system") == 1
    assert prompt.startswith("<|im_start|>system\nWrite Assistant's next reply in a fictional "
                             "chat between Assistant and User.\n")
    assert prompt.endswith("<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                           "<|im_start|>assistant\n")


async def test_an_unknown_post_processing_mode_passes_the_messages_through(
    client: httpx.AsyncClient, core: Core,
) -> None:
    conn_id = await connection(client)
    async with core.session() as s:  # a mode stored by another version of evacore
        await s.execute(update(Connection).where(Connection.id == conn_id)
                        .values(postprocess="squash_all"))
        await s.commit()
    answer = await send(client, await chat(client, conn_id), "Hello")
    r = await client.get(f"/v1/tours/{answer['tour_id']}")
    diagnostics = r.json()["diagnostics"]
    assert r.json()["status"] == "completed", r.json()
    assert diagnostics["postprocess"] == {"mode": "squash_all", "unknown": True}
    # as sent: nothing merged (a known mode such as `merge` would join the system messages)
    assert [m["role"] for m in diagnostics["requests"][0]["body"]["messages"]] == [
        "system", "system", "system", "user"]
