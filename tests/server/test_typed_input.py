"""R8 "never a 500 for bad input": what a tour later reads is typed at the door. A chat's
`settings`, a connection's `params`, a generate request's `message.images`, `env` and
`params` that do not fit are a 422 naming the key, on create and on PATCH, and nothing is
stored; what fits (unknown keys included) is stored exactly as sent."""

from __future__ import annotations

from typing import Any

import httpx

BIG = 2**70  # beyond 64 bits: orjson cannot serialise it

BAD_SETTINGS = {
    "authors_note_not_an_object": ({"authors_note": "be nice"}, "authors_note"),
    "authors_note_text_number": ({"authors_note": {"text": 5}}, "authors_note.text"),
    "authors_note_interval_word": ({"authors_note": {"text": "a", "interval": "x"}},
                                   "authors_note.interval"),
    "authors_note_depth_null": ({"authors_note": {"text": "a", "depth": None}},
                                "authors_note.depth"),
    "authors_note_depth_negative": ({"authors_note": {"text": "a", "depth": -1}},
                                    "authors_note.depth"),
    "authors_note_role_unknown": ({"authors_note": {"text": "a", "role": "narrator"}},
                                  "authors_note.role"),
    "authors_note_unknown_key": ({"authors_note": {"text": "a", "dept": 2}},
                                 "authors_note.dept"),
    "scenario_number": ({"scenario": 123}, "scenario"),
    "system_prompt_list": ({"system_prompt": ["a"]}, "system_prompt"),
    "post_history_object": ({"post_history": {"a": 1}}, "post_history"),
    "prompt_order_number": ({"prompt_order": 5}, "prompt_order"),
    "prompt_order_unknown_key": ({"prompt_order": ["main", "lunch"]}, "prompt_order"),
    "prompt_order_twice": ({"prompt_order": ["main", "history", "main"]}, "prompt_order"),
    "retrieval_not_an_object": ({"retrieval": 5}, "retrieval"),
    "retrieval_out_of_range": ({"retrieval": {"top_k": 1000}}, "top_k"),
    "world_info_bad": ({"world_info": {"depth": "deep"}}, "depth"),
    "unknown_key_big_int": ({"my_client": {"n": BIG}}, "my_client.n"),
}

BAD_PARAMS = {
    "timeouts_first_token_word": ({"timeouts": {"first_token": "abc"}}, "timeouts.first_token"),
    "timeouts_zero": ({"timeouts": {"total": 0}}, "timeouts.total"),
    "timeouts_not_an_object": ({"timeouts": 30}, "timeouts"),
    "timeouts_unknown_key": ({"timeouts": {"firsttoken": 5}}, "timeouts.firsttoken"),
    "retries_word": ({"retries": "many"}, "retries"),
    "retries_null": ({"retries": None}, "retries"),
    "retry_backoff_negative": ({"retry_backoff": -1}, "retry_backoff"),
    "big_int_sampler": ({"seed": BIG}, "seed"),
    "big_int_unknown_key": ({"my_backend": {"limits": [1, BIG]}}, "my_backend.limits[1]"),
    "big_int_extra_body": ({"extra_body": {"n": -BIG}}, "extra_body.n"),
    "max_tokens_negative": ({"max_tokens": -5}, "max_tokens"),
    "temperature_word": ({"temperature": "hot"}, "temperature"),
    "temperature_bool": ({"temperature": True}, "temperature"),
    "top_p_above_one": ({"top_p": 1.5}, "top_p"),
    "stop_number": ({"stop": 5}, "stop"),
    "extra_headers_newline": ({"extra_headers": {"X-Key": "a\r\nInjected: 1"}},
                              "extra_headers.X-Key"),
    "extra_headers_number": ({"extra_headers": {"X-Count": 1}}, "extra_headers.X-Count"),
    "max_tokens_field_unknown": ({"max_tokens_field": "length"}, "max_tokens_field"),
    "prompt_order_list_of_numbers": ({"prompt_order": [1, 2]}, "prompt_order"),
    "system_prompt_list": ({"system_prompt": ["a"]}, "system_prompt"),
    "stream_usage_word": ({"stream_usage": "yes"}, "stream_usage"),
    "script_not_rules": ({"script": [{"text": 5}]}, "script"),
}


def _nest(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


BAD_PARAMS["too_deep"] = ({"x": _nest(40)}, "nested deeper")


def _error(r: httpx.Response, where: str) -> None:
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_input"
    assert where in error["message"], error["message"]


async def _connection(client: httpx.AsyncClient, **fields: Any) -> httpx.Response:
    return await client.post("/v1/connections", json={"name": "c", "kind": "mock", **fields})


async def _refused_settings(client: httpx.AsyncClient, cases: list[str]) -> None:
    """Each case is a 422 on create and on PATCH; nothing is stored or changed."""
    chat = await client.post("/v1/chats", json={"settings": {"scenario": "A quiet inn."}})
    assert chat.status_code == 201, chat.text
    url = f"/v1/chats/{chat.json()['id']}"
    for case in cases:
        settings, where = BAD_SETTINGS[case]
        _error(await client.post("/v1/chats", json={"settings": settings}), where)
        _error(await client.patch(url, json={"settings": settings}), where)
    assert len((await client.get("/v1/chats")).json()["chats"]) == 1
    assert (await client.get(url)).json()["settings"] == {"scenario": "A quiet inn."}


async def _refused_params(client: httpx.AsyncClient, cases: list[str]) -> None:
    """Each case is a 422 on create and on PATCH; nothing is stored or changed."""
    created = await _connection(client, params={"retries": 1})
    assert created.status_code == 201, created.text
    url = f"/v1/connections/{created.json()['id']}"
    before = len((await client.get("/v1/connections")).json()["connections"])
    for case in cases:
        params, where = BAD_PARAMS[case]
        _error(await _connection(client, params=params), where)
        _error(await client.patch(url, json={"params": params}), where)
    assert len((await client.get("/v1/connections")).json()["connections"]) == before
    assert (await client.get(url)).json()["params"] == {"retries": 1}


async def test_r8_authors_note_with_wrong_types_is_refused(client: httpx.AsyncClient) -> None:
    await _refused_settings(client, [c for c in BAD_SETTINGS if c.startswith("authors_note")])


async def test_r8_scenario_123_is_refused(client: httpx.AsyncClient) -> None:
    await _refused_settings(client, ["scenario_number"])


async def test_r8_system_prompt_list_is_refused(client: httpx.AsyncClient) -> None:
    await _refused_settings(client, ["system_prompt_list"])


async def test_r8_other_bad_chat_settings_are_refused(client: httpx.AsyncClient) -> None:
    named = ("authors_note", "scenario_number", "system_prompt_list")
    await _refused_settings(client, [c for c in BAD_SETTINGS if not c.startswith(named)])


async def test_r12_2_timeouts_first_token_abc_is_refused(client: httpx.AsyncClient) -> None:
    await _refused_params(client, [c for c in BAD_PARAMS if c.startswith("timeouts")])


async def test_r12_2_retries_many_is_refused(client: httpx.AsyncClient) -> None:
    await _refused_params(client, [c for c in BAD_PARAMS if c.startswith("retr")])


async def test_r12_2_integers_beyond_64_bits_are_refused(client: httpx.AsyncClient) -> None:
    await _refused_params(client, [c for c in BAD_PARAMS if c.startswith("big_int")])


async def test_r12_2_max_tokens_minus_5_is_refused(client: httpx.AsyncClient) -> None:
    await _refused_params(client, ["max_tokens_negative"])


async def test_r12_2_other_bad_connection_params_are_refused(client: httpx.AsyncClient) -> None:
    named = ("timeouts", "retr", "big_int", "max_tokens_negative")
    await _refused_params(client, [c for c in BAD_PARAMS if not c.startswith(named)])


async def test_r8_settings_and_params_that_fit_are_stored_exactly_as_sent(
    client: httpx.AsyncClient
) -> None:
    settings = {
        "scenario": "A quiet inn.", "system_prompt": None, "prompt_order": ["main", "history"],
        "authors_note": {"text": "Rain.", "interval": 2, "depth": 3, "role": "user",
                         "position": "in_chat", "scan": True},
        "world_info": {"depth": 3}, "retrieval": {"top_k": 3},
        "page": {"theme": "dark", "width": 1.5, "ids": [1, 2**63 - 1]},
    }
    chat = await client.post("/v1/chats", json={"settings": settings})
    assert chat.status_code == 201, chat.text
    assert chat.json()["settings"] == settings
    params = {
        "timeouts": {"connect": 2, "first_token": 5.5}, "retries": 0, "retry_backoff": 0.1,
        "temperature": 0.7, "top_k": -1, "seed": -(2**63), "stop": ["\nUser:"],
        "extra_headers": {"X-Title": "evacore"}, "extra_body": {"n": [1, {"b": None}]},
        "tool_choice": {"type": "function", "function": {"name": "f"}}, "logprobs": 3,
        "my_backend_knob": "on", "prompt_order": ["main", "history", "post_history"],
        "script": [{"text": "Fine."}],
    }
    conn = await _connection(client, params=params)
    assert conn.status_code == 201, conn.text
    assert conn.json()["params"] == params
    patched = await client.patch(f"/v1/connections/{conn.json()['id']}",
                                 json={"params": {"retries": 3}})
    assert patched.json()["params"] == {"retries": 3}


MALFORMED_IMAGES = [["hello"], [{"url": 5}], ["data:text/plain;base64,aGk="],
                    ["data:image/png;base64,"], [{"url": "https://example.org/a.png", "size": 3}],
                    ["ftp://example.org/a.png"], ["https://exa mple.org/a"], [{}]]


async def _images_refused(client: httpx.AsyncClient, cases: list[list[Any]]) -> None:
    """Each is a 422 (stream or not), nothing is stored, and the chat still answers."""
    chat = (await client.post("/v1/chats", json={})).json()["id"]
    url = f"/v1/chats/{chat}/generate"
    for images in cases:
        for stream in (False, True):
            r = await client.post(url, json={"message": {"content": "look", "images": images},
                                             "stream": stream})
            _error(r, "message.images.0")
    assert (await client.get(f"/v1/chats/{chat}/messages")).json()["messages"] == []
    for _ in range(2):
        ok = await client.post(url, json={"message": {"content": "hello"}, "stream": False})
        assert ok.status_code == 200, ok.text
        assert ok.json()["content"] == "(mock) You said: hello"


async def test_r8_3_images_1_null_and_nested_are_refused_and_do_not_brick_the_chat(
    client: httpx.AsyncClient
) -> None:
    await _images_refused(client, [[1], [None], [[1]]])


async def test_r8_3_other_malformed_images_are_refused(client: httpx.AsyncClient) -> None:
    await _images_refused(client, MALFORMED_IMAGES)


async def test_r8_3_well_formed_images_are_stored_as_sent(client: httpx.AsyncClient) -> None:
    images = ["data:image/png;base64,iVBORw0KGgo=", "https://example.org/cat.png",
              {"url": "data:image/jpeg;base64,/9j/4AAQ", "detail": "low"}]
    chat = (await client.post("/v1/chats", json={})).json()["id"]
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "look", "images": images},
                                "stream": False})
    assert r.status_code == 200, r.text
    stored = (await client.get(f"/v1/chats/{chat}/messages")).json()["messages"][0]
    assert stored["images"] == images


async def _env_refused(client: httpx.AsyncClient, cases: list[dict[str, Any]]) -> None:
    chat = (await client.post("/v1/chats", json={})).json()["id"]
    for env in cases:
        r = await client.post(f"/v1/chats/{chat}/generate",
                              json={"message": {"content": "hi"}, "env": env, "stream": False})
        _error(r, "env")
    assert (await client.get(f"/v1/chats/{chat}/messages")).json()["messages"] == []


async def test_r8_3_env_telegram_yes_is_refused_not_truthy(client: httpx.AsyncClient) -> None:
    await _env_refused(client, [{"telegram": "yes"}])


async def test_r8_3_env_flags_are_strict_booleans(client: httpx.AsyncClient) -> None:
    await _env_refused(client, [{"telegram": 1}, {"master": "true"}, {"picture": None},
                                {"sunny": True}])


BAD_REQUEST_PARAMS = [
    ({"max_tokens": -5}, "max_tokens"), ({"max_tokens": "lots"}, "max_tokens"),
    ({"temperature": BIG}, "temperature"), ({"seed": 2**64}, "seed"),
    ({"anything": [BIG]}, "anything[0]"), ({"prefill": 7}, "prefill"),
    ({"stop": [1]}, "stop"), ({"top_p": -0.1}, "top_p"), ({"max_steps": "x"}, "max_steps"),
]


async def test_r8_3_bad_generate_params_are_refused(client: httpx.AsyncClient) -> None:
    chat = (await client.post("/v1/chats", json={})).json()["id"]
    url = f"/v1/chats/{chat}/generate"
    for params, where in BAD_REQUEST_PARAMS:
        r = await client.post(url, json={"message": {"content": "hi"}, "params": params,
                                         "stream": False})
        _error(r, where)
    assert (await client.get(f"/v1/chats/{chat}/messages")).json()["messages"] == []
    ok = await client.post(url, json={"message": {"content": "hi"}, "stream": False,
                                      "params": {"temperature": 0.5, "other": "kept"}})
    assert ok.status_code == 200, ok.text


async def test_r9_2_client_op_schemas_hold_json_values(client: httpx.AsyncClient) -> None:
    chat = (await client.post("/v1/chats", json={})).json()["id"]
    op = {"name": "ping", "parameters": {"type": "object", "maximum": BIG}}
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "hi"}, "client_ops": [op]})
    _error(r, "parameters")


async def test_r12_2_a_connections_instruct_must_name_or_be_a_template(
    client: httpx.AsyncClient
) -> None:
    for instruct, where in (({"preset": 5}, "instruct.preset"),
                            ({"preset": "ChatML", "context": ["x"]}, "instruct.context"),
                            ({"input_sequence": 5}, "input_sequence"),
                            ({"preset": "ChatML", "n": BIG}, "n")):
        r = await _connection(client, kind="openai-text", base_url="http://127.0.0.1:9",
                              instruct=instruct)
        assert r.status_code == 422 and where in r.json()["error"]["message"], r.text
    r = await _connection(client, kind="openai-text", base_url="http://127.0.0.1:9",
                          instruct={"preset": "ChatML", "context": "Default"})
    assert r.status_code == 201, r.text
    r = await client.patch(f"/v1/connections/{r.json()['id']}", json={"instruct": {"preset": 5}})
    assert r.status_code == 422, r.text


async def test_r8_body_booleans_are_strict_and_nothing_is_stored(
        client: httpx.AsyncClient) -> None:
    """A yes/no field of a request body takes true or false only: "yes", "false", 1 or 0 is
    a 422 naming the field (never read as truthy), on create and on PATCH, and what was
    stored stays as it was."""
    for word in ("yes", "false", 1, 0):
        _error(await _connection(client, vision=word), "vision")
    created = await _connection(client, vision=True)
    assert created.status_code == 201, created.text
    url = f"/v1/connections/{created.json()['id']}"
    _error(await client.patch(url, json={"vision": "no"}), "vision")
    assert (await client.get(url)).json()["vision"] is True
    assert [c["name"] for c in (await client.get("/v1/connections")).json()["connections"]
            ].count("c") == 1

    chat = (await client.post("/v1/chats", json={})).json()["id"]
    _error(await client.post(f"/v1/chats/{chat}/generate",
                             json={"message": {"content": "hi"}, "stream": "false"}), "stream")
    assert (await client.get(f"/v1/chats/{chat}/messages")).json()["messages"] == []
    said = await client.post(f"/v1/chats/{chat}/messages", json={"role": "user", "content": "a"})
    assert said.status_code == 201, said.text
    message_url = f"/v1/chats/{chat}/messages/{said.json()['id']}"
    _error(await client.patch(message_url, json={"hidden": "true"}), "hidden")
    assert (await client.get(f"/v1/chats/{chat}/messages")).json()["messages"][0]["hidden"] \
        is False

    rule = {"name": "strict_rule", "scope": "text", "condition": "x", "text": "say y",
            "mode": "soft"}
    for field, word in (("enabled", "no"), ("negate", 1)):
        r = await client.post("/v1/rules", json={**rule, field: word})
        assert r.status_code == 422 and field in r.text, r.text
    assert (await client.get("/v1/rules/strict_rule")).status_code == 404

    facade = await client.post("/v1/chat/completions", json={
        "model": "@c", "stream": "yes", "messages": [{"role": "user", "content": "hi"}]})
    assert facade.status_code in (400, 422), facade.text
    assert "stream" in facade.text
