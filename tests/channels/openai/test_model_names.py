"""R14.1 model names as the facade resolves them, while it remembers the character and
connection lists for a moment: a change made here is seen at once, a name made a moment
ago through another instance is found, a deleted name is refused."""

from __future__ import annotations

import httpx
import openai
import pytest
from sqlalchemy import insert

from evacore.core import Core
from evacore.domain.ids import new_id, utcnow
from evacore.store.tables import Character
from tests.channels.openai.conftest import add_character
from tests.fakes.upstream import FakeUpstream

HI = [{"role": "user", "content": "Hi"}]


async def test_a_renamed_or_deleted_character_is_seen_at_once(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    char_id = await add_character(client, "Brann")
    assert (await oai.chat.completions.create(model="brann@up", messages=HI)).choices
    r = await client.patch(f"/v1/characters/{char_id}", json={"data": {"name": "Bryn"}})
    assert r.status_code == 200, r.text
    assert (await oai.chat.completions.create(model="bryn@up", messages=HI)).choices
    with pytest.raises(openai.NotFoundError) as gone:
        await oai.chat.completions.create(model="brann@up", messages=HI)
    assert gone.value.code == "model_not_found"
    assert (await client.delete(f"/v1/characters/{char_id}")).status_code == 204
    with pytest.raises(openai.NotFoundError):
        await oai.chat.completions.create(model="bryn@up", messages=HI)


async def test_a_character_made_through_another_instance_is_found_at_once(
    oai: openai.AsyncOpenAI, core: Core, upstream: FakeUpstream
) -> None:
    assert (await oai.chat.completions.create(model="@up", messages=HI)).choices  # lists read
    async with core.engine.begin() as conn:  # a write this process's sessions never saw
        now = utcnow()
        await conn.execute(insert(Character.__table__).values(
            id=new_id(), name="Ysolde", spec="v3", data={"name": "Ysolde"}, extra_top={},
            created_at=now, updated_at=now))
    done = await oai.chat.completions.create(model="ysolde@up", messages=HI)
    assert done.choices[0].message.content
    page = await oai.models.list()
    assert "Ysolde" in [m.id for m in page.data]
