"""R8.4: the fields channels rely on. The `tour` event says whether answers are held; `done`
carries the provider's usage and the stage timings; while a text rule is armed a `hold` comes
before any text, and a discarded answer never streams."""

from __future__ import annotations

import httpx

from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import deltas, fake_connection, names, new_chat, one, stream


async def test_r8_4_tour_held_flag_and_done_usage_without_a_rule(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.reply("Plain words.")
    events = await stream(client, chat, "Hi")
    assert names(events)[0] == "tour" and one(events, "tour")["held"] is False
    assert "hold" not in names(events)
    done = one(events, "done")
    assert done["usage"]["prompt_tokens"] > 0 and done["usage"]["completion_tokens"] > 0
    assert {"user_input", "request", "save"} <= set(done["timings"])
    assert names(events)[-1] == "done"


async def test_r8_4_an_armed_text_rule_holds_and_hides_the_discarded_answer(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    r = await client.post("/v1/rules", json={"name": "no_shouting", "scope": "text",
                                             "condition": "SHOUT", "text": "Speak softly."})
    assert r.status_code == 201
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.reply("I SHOUT this.").reply("I say this softly.")
    events = await stream(client, chat, "Hi")
    assert one(events, "tour")["held"] is True
    order = names(events)
    assert order.index("hold") < order.index("delta")
    assert "SHOUT" not in "".join(deltas(events))
    assert one(events, "message")["content"] == "I say this softly."
