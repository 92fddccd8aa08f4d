"""R2.9: Hugging Face chat templates render in a bounded, immutable Jinja sandbox."""

from __future__ import annotations

import copy
import time

import pytest

from evacore.errors import InvalidInput
from evacore.render.instruct import bundled_instruct
from evacore.render.jinja import render_chat_template
from evacore.render.text import render_text

CHATML_JINJA = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CHAT = [
    {"role": "system", "content": "You are Seraphina, guardian of the forest."},
    {"role": "user", "content": "Hello?"},
    {"role": "assistant", "content": "Welcome, traveler."},
    {"role": "user", "content": "Where am I?"},
]


def test_r2_9_jinja_chatml_equals_the_chatml_instruct_preset() -> None:
    expected = (
        "<|im_start|>system\nYou are Seraphina, guardian of the forest.<|im_end|>\n"
        "<|im_start|>user\nHello?<|im_end|>\n"
        "<|im_start|>assistant\nWelcome, traveler.<|im_end|>\n"
        "<|im_start|>user\nWhere am I?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert render_chat_template(CHATML_JINJA, CHAT) == expected
    instruct = render_text(
        CHAT, bundled_instruct("ChatML"), char_name="Seraphina", user_name="Anon"
    )
    assert instruct.prompt == expected
    assert render_chat_template(
        CHATML_JINJA, CHAT, add_generation_prompt=False
    ) == expected.removesuffix("<|im_start|>assistant\n")


LLAMA3_STYLE = """{{ bos_token }}
{%- for message in messages %}
    {%- if loop.index0 == 0 and message['role'] != 'system' %}
        {{- raise_exception('first message must be the system prompt') }}
    {%- endif %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}"""


def test_r2_9_jinja_bos_token_whitespace_control_and_trim_blocks() -> None:
    out = render_chat_template(LLAMA3_STYLE, CHAT[:2], bos_token="<|begin_of_text|>")
    assert out == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "You are Seraphina, guardian of the forest.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHello?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_r2_9_jinja_raise_exception_is_a_clear_invalid_input() -> None:
    with pytest.raises(InvalidInput) as info:
        render_chat_template(LLAMA3_STYLE, CHAT[1:])
    assert "first message must be the system prompt" in info.value.message


def test_r2_9_jinja_helpers_tojson_strftime_and_loop_controls() -> None:
    template = (
        "{{ tools | tojson }}|{{ strftime_now('%Y') }}|"
        "{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}"
        "{% if m.role == 'system' %}{% continue %}{% endif %}{{ m.role }};{% endfor %}|"
        "{% generation %}{{ eos_token }}{% endgeneration %}|{{ date_string }}"
    )
    tools = [{"type": "function", "function": {"name": "ré", "parameters": {}}}]
    out = render_chat_template(template, CHAT, tools=tools, eos_token="</s>", date_string="26 Jul")
    assert out == (
        '[{"type": "function", "function": {"name": "ré", "parameters": {}}}]'
        f"|{time.strftime('%Y')}|user;|</s>|26 Jul"
    )


def test_r2_9_jinja_tojson_options() -> None:
    out = render_chat_template("{{ {'b': 1, 'a': [1]} | tojson(indent=2, sort_keys=True) }}", [])
    assert out == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}'


@pytest.mark.parametrize(
    "template",
    [
        "{{ messages.__class__.__mro__ }}",
        "{{ ''.__class__.__subclasses__() }}",
        "{{ raise_exception.__globals__ }}",
        "{{ messages[0].__class__ }}",
    ],
)
def test_r2_9_jinja_sandbox_blocks_internals(template: str) -> None:
    with pytest.raises(InvalidInput) as info:
        render_chat_template(template, CHAT)
    assert "sandbox" in info.value.message


def test_r2_9_jinja_cannot_mutate_the_messages() -> None:
    before = copy.deepcopy(CHAT)
    for template in (
        "{% set _ = messages.append({'role': 'user', 'content': 'x'}) %}",
        "{% set _ = messages[0].update({'content': 'hacked'}) %}",
        "{% set _ = messages.pop() %}",
    ):
        with pytest.raises(InvalidInput):
            render_chat_template(template, CHAT)
    assert CHAT == before


@pytest.mark.parametrize(
    "template",
    [
        (
            "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(10) %}"
            "{% endfor %}{% endfor %}{% endfor %}"
        ),
        "{% for i in range(10000000) %}x{% endfor %}",
        "{{ 'x' * 100000000 }}",
        "{{ 'x' | center(1000000000) }}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "{{ 2 ** 100000 }}",
    ],
)
def test_r2_9_jinja_runaway_templates_stop_with_invalid_input(template: str) -> None:
    started = time.monotonic()
    with pytest.raises(InvalidInput) as info:
        render_chat_template(template, CHAT)
    assert "chat template" in info.value.message
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("template", ["{% for %}", "{{ unclosed", "{% endif %}"])
def test_r2_9_jinja_syntax_errors_are_invalid_input(template: str) -> None:
    with pytest.raises(InvalidInput) as info:
        render_chat_template(template, CHAT)
    assert "does not compile" in info.value.message


def test_r2_9_jinja_large_numbers_still_render() -> None:
    out = render_chat_template("{{ 1700000000 | string }} {{ range(3) | list | length }}", [])
    assert out == "1700000000 3"
