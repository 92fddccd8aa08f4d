"""Hugging Face chat templates (`tokenizer_config.json`'s `chat_template`) in a Jinja sandbox.

Must not: load tokenizers or models, or let a template reach Python internals, mutate the
messages, run without bounds (time, loop iterations, output size), or raise anything but
`InvalidInput`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from datetime import datetime
from functools import lru_cache
from typing import Any, ClassVar

from jinja2 import TemplateError, nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from evacore.errors import InvalidInput

__all__ = ["render_chat_template"]

TIME_LIMIT_S = 2.0
"""Wall-clock budget of one render."""
MAX_OUTPUT_CHARS = 4_000_000
MAX_ITERATIONS = 250_000
"""`range()` iterations one render may use in total."""
MAX_REPEAT = 1_000_000
"""Largest string/list that `*`, `**` or a filter's numeric argument may ask for."""


class _Exhausted(Exception):
    """The render ran past one of its limits."""


_STRETCHING_FILTERS = frozenset({"center", "indent", "slice", "format"})
"""Filters whose numeric arguments decide how much memory the result takes."""


class _Budget:
    def __init__(self) -> None:
        self.deadline = time.monotonic() + TIME_LIMIT_S
        self.iterations = 0

    def tick(self, count: int = 0) -> None:
        """Count `count` loop iterations and check the clock."""
        self.iterations += count
        if self.iterations > MAX_ITERATIONS:
            raise _Exhausted(f"more than {MAX_ITERATIONS} loop iterations")
        if time.monotonic() > self.deadline:
            raise _Exhausted(f"took longer than {TIME_LIMIT_S} s")


class _TemplateRaised(Exception):
    """`raise_exception(...)` was called by the template."""


class _GenerationTag(Extension):
    """Hugging Face's `{% generation %}…{% endgeneration %}` marks assistant text; renders as is."""

    tags: ClassVar[set[str]] = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


class _Environment(ImmutableSandboxedEnvironment):
    """Hugging Face's settings, plus a budget checked on every call, attribute and `range` step."""

    intercepted_binops = frozenset({"*", "**", "%"})

    def __init__(self) -> None:
        super().__init__(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[loopcontrols, _GenerationTag],
            autoescape=False,
        )
        self.globals["raise_exception"] = _raise_exception
        self.globals["strftime_now"] = _strftime_now
        self.globals["range"] = self._range
        self.filters["tojson"] = _tojson
        for name in _STRETCHING_FILTERS:
            self.filters[name] = _guard_filter(self.filters[name])

    def _tick(self, count: int = 0) -> None:
        budget = _BUDGET.get()
        if budget is not None:
            budget.tick(count)

    def _range(self, *args: int) -> _CountingRange:
        for value in args:
            if isinstance(value, int) and abs(value) > MAX_ITERATIONS:
                raise _Exhausted(f"range() argument {value} is too large")
        return _CountingRange(range(*args), lambda: self._tick(1))

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        self._tick()
        if isinstance(getattr(obj, "__self__", None), (str, list, tuple)):
            _check_sizes(list(args) + list(kwargs.values()))
        return super().call(context, obj, *args, **kwargs)

    def getattr(self, obj: Any, attribute: str) -> Any:
        self._tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self._tick()
        return super().getitem(obj, argument)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # Fail loudly instead of rendering an empty string for a blocked attribute.
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self._tick()
        if operator == "*":
            for size, count in ((left, right), (right, left)):
                if (
                    isinstance(size, (str, list, tuple))
                    and isinstance(count, int)
                    and len(size) * max(count, 0) > MAX_REPEAT
                ):
                    raise _Exhausted("a repeated string or list would be too large")
        if operator == "**" and isinstance(right, int) and abs(right) > 256:
            raise _Exhausted("exponent too large")
        if operator == "%" and isinstance(left, str):
            _check_sizes(list(right) if isinstance(right, tuple) else [right])
        return super().call_binop(context, operator, left, right)


class _CountingRange:
    """`range()` for templates: every step counts against the render's budget."""

    def __init__(self, inner: range, tick: Any) -> None:
        self._inner = inner
        self._tick = tick

    def __iter__(self) -> Iterator[int]:
        for value in self._inner:
            self._tick()
            yield value

    def __reversed__(self) -> Iterator[int]:
        for value in reversed(self._inner):
            self._tick()
            yield value

    def __len__(self) -> int:
        return len(self._inner)

    def __getitem__(self, index: Any) -> Any:
        item = self._inner[index]
        return _CountingRange(item, self._tick) if isinstance(item, range) else item

    def __contains__(self, value: object) -> bool:
        return value in self._inner


def _check_sizes(values: Sequence[Any]) -> None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_REPEAT:
            raise _Exhausted(f"argument {value} is too large")


def _guard_filter(function: Any) -> Any:
    skip = 2 if hasattr(function, "jinja_pass_arg") else 1  # context/environment, then value

    def guarded(*args: Any, **kwargs: Any) -> Any:
        _check_sizes(list(args[skip:]) + list(kwargs.values()))
        return function(*args, **kwargs)

    if hasattr(function, "jinja_pass_arg"):
        guarded.jinja_pass_arg = function.jinja_pass_arg  # type: ignore[attr-defined]
    guarded.__name__ = getattr(function, "__name__", "filter")
    return guarded


def _raise_exception(message: str) -> None:
    raise _TemplateRaised(str(message))


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: Sequence[str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value,
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=tuple(separators) if separators is not None else None,
        sort_keys=sort_keys,
    )


_BUDGET: ContextVar[_Budget | None] = ContextVar("chat_template_budget", default=None)
_ENV = _Environment()


@lru_cache(maxsize=64)
def _compile(source: str) -> Any:
    try:
        return _ENV.from_string(source)
    except TemplateError as exc:
        raise InvalidInput(f"chat template does not compile: {exc}") from None


def render_chat_template(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    bos_token: str = "",
    eos_token: str = "",
    tools: Sequence[Mapping[str, Any]] | None = None,
    **extra: Any,
) -> str:
    """Render a Hugging Face chat template the way `apply_chat_template` does.

    The sandbox is immutable (no `append`/`update`, no dunder attributes) and bounded
    (`TIME_LIMIT_S`, `MAX_ITERATIONS`, `MAX_OUTPUT_CHARS`). `extra` becomes template
    variables (`documents`, `date_string`, `enable_thinking`, other special tokens…).
    Any failure — a syntax error, `raise_exception(...)`, a sandbox violation, an
    exhausted budget — raises `InvalidInput` naming the cause.
    """
    compiled = _compile(template)
    variables = dict(extra)
    variables.update(
        messages=list(messages),
        add_generation_prompt=add_generation_prompt,
        bos_token=bos_token,
        eos_token=eos_token,
        tools=list(tools) if tools is not None else None,
    )
    budget = _Budget()
    token = _BUDGET.set(budget)
    chunks: list[str] = []
    size = 0
    try:
        for chunk in compiled.generate(**variables):
            size += len(chunk)
            if size > MAX_OUTPUT_CHARS:
                raise _Exhausted(f"output longer than {MAX_OUTPUT_CHARS} characters")
            budget.tick(0)
            chunks.append(chunk)
    except _TemplateRaised as exc:
        raise InvalidInput(f"chat template raised an error: {exc}") from None
    except SecurityError as exc:
        raise InvalidInput(f"chat template blocked by the sandbox: {exc}") from None
    except _Exhausted as exc:
        raise InvalidInput(f"chat template stopped: {exc}") from None
    except RecursionError:
        raise InvalidInput("chat template stopped: recursion too deep") from None
    except TemplateError as exc:
        raise InvalidInput(f"chat template failed: {exc}") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError) as exc:
        raise InvalidInput(f"chat template failed: {type(exc).__name__}: {exc}") from None
    finally:
        _BUDGET.reset(token)
    return "".join(chunks)
