"""R12.7: the public rendering surface is importable where the SPEC says it is."""

from __future__ import annotations

import importlib
import inspect

import evacore.render
from evacore.render.postprocess import postprocess_prompt

MODULES = (
    "evacore.render.examples",
    "evacore.render.instruct",
    "evacore.render.jinja",
    "evacore.render.postprocess",
    "evacore.render.stops",
    "evacore.render.story",
    "evacore.render.text",
)


def test_r12_7_postprocess_prompt_has_the_contract_signature() -> None:
    signature = inspect.signature(postprocess_prompt)
    params = signature.parameters
    assert list(params) == [
        "messages",
        "mode",
        "char_name",
        "user_name",
        "group_names",
        "placeholder",
    ]
    assert params["char_name"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["group_names"].default == ()
    assert params["placeholder"].default == "Let's get started."


def test_r12_7_every_exported_name_exists() -> None:
    for module_name in ("evacore.render", *MODULES):
        module = importlib.import_module(module_name)
        for name in module.__all__:
            assert hasattr(module, name), f"{module_name}.{name}"
    for name in evacore.render.__all__:
        owner = getattr(evacore.render, name).__module__
        assert owner in MODULES, f"{name} comes from {owner}"
