"""R14.0: the one door types what every channel hands it, as the HTTP body models do:
images of the accepted shapes, env flags that are booleans, params of the right types —
so a channel other than HTTP generate cannot slip a malformed value into a tour."""

from __future__ import annotations

from typing import Any

import pytest

from evacore.errors import InvalidInput
from evacore.pipeline.request import TourRequest, tour_for


def _tour(**fields: Any) -> Any:
    return tour_for(TourRequest(chat_id="c", user_id="u", role="master", text="hi", **fields),
                    max_steps=8)


@pytest.mark.parametrize(("fields", "where"), [
    ({"images": [1]}, "message.images.0"), ({"images": [None]}, "message.images.0"),
    ({"images": [[1]]}, "message.images.0"), ({"env": {"telegram": "yes"}}, "env.telegram"),
    ({"channel_env": {"telegram": 1}}, "channel_env.telegram"),
    ({"params": {"max_tokens": -5}}, "max_tokens"), ({"params": {"seed": 2**70}}, "seed"),
    ({"params": {"prefill": 3}}, "prefill"),
], ids=["image_int", "image_null", "image_list", "env_yes", "channel_env_one",
        "max_tokens_negative", "seed_big_int", "prefill_number"])
def test_r14_0_the_door_refuses_malformed_values_from_any_channel(fields: dict[str, Any],
                                                                  where: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        _tour(**fields)
    assert where in raised.value.message


def test_r14_0_well_typed_values_pass_the_door_unchanged() -> None:
    images = ["data:image/png;base64,iVBORw0KGgo=", {"url": "https://example.org/a.png"}]
    tour = _tour(images=images, env={"telegram": True}, params={"temperature": 0.3, "x": [1]})
    assert tour.input_images == images
    assert tour.env["telegram"] is True
    assert tour.params == {"temperature": 0.3, "x": [1]}
