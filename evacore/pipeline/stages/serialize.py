"""Stage 10, provider serialization: the step's ProviderRequest from the prompt copy.

Must not: speak HTTP or know wire formats (the adapter builds its body from this request).
Chat connections take the structured array; text connections take the rendered string.
A non-master's `max_tokens` never exceeds the connection's: a larger one is lowered to it
(and recorded in diagnostics) rather than refused, as `max_steps` is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evacore.domain.connection_params import bounded_max_tokens
from evacore.providers.base import ProviderRequest
from evacore.render.postprocess import is_known_mode, postprocess_prompt

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

# Sampler and request settings a generate call may set per request (others are ignored).
REQUEST_PARAMS = (
    "temperature", "top_p", "top_k", "min_p", "typical_p", "repetition_penalty",
    "frequency_penalty", "presence_penalty", "seed", "stop", "max_tokens", "rep_pen",
    "rep_pen_range", "tfs", "top_a", "mirostat", "mirostat_tau", "mirostat_eta", "tool_choice",
)
_OWN_FIELDS = ("max_tokens", "stop", "tool_choice")
"""Params the request carries in its own fields (or, for `tool_choice`, on the first step only)."""


def request_params(tour: Tour) -> dict[str, Any]:
    params = {k: v for k, v in tour.params.items() if k in REQUEST_PARAMS and k not in _OWN_FIELDS}
    if "tool_choice" in tour.params and not tour.steps:
        # a forced choice applies to the first step: after its tool results the model may
        # answer (a loop forced to call tools would only end at the step limit)
        params["tool_choice"] = tour.params["tool_choice"]
    return params


def request_stops(tour: Tour) -> list[str]:
    """The template's stop strings and the request's own `params.stop` (a string or a list)."""
    asked = tour.params.get("stop")
    extra = [asked] if isinstance(asked, str) else asked if isinstance(asked, list) else []
    stops = [*(tour.data.get("stop") or []), *(s for s in extra if isinstance(s, str) and s)]
    return list(dict.fromkeys(stops))


def _max_tokens(tour: Tour, connection_max: int) -> int:
    """The request's `max_tokens`, bounded by the connection's for a non-master; a lowered
    request is recorded in diagnostics once."""
    asked = tour.params.get("max_tokens")
    sent = bounded_max_tokens(asked, connection_max, master=tour.role == "master")
    if asked is not None and sent != asked:
        tour.diagnostics["max_tokens"] = {
            "asked": asked, "sent": sent,
            "reason": f"a {tour.role} cannot ask for more than the connection's max_tokens",
        }
    return sent


class Serialize:
    number = 10
    name = "serialize"

    async def run(self, core: Core, tour: Tour) -> None:
        conn = tour.data["connection"]
        first = len(tour.steps) == 0 or tour.data.get("retrying")
        # what the provider gets: the stored prefix, unless only part of it is sent
        step_prefill = tour.data.get("prefill_request", tour.data.get("prefill", "")) \
            if first else ""
        render = tour.data.get("render_text")
        request = ProviderRequest(
            tools=tour.data.get("tool_schemas") or [],
            params=request_params(tour),
            max_tokens=_max_tokens(tour, conn["max_tokens"]),
            stop=request_stops(tour),
            prefill=step_prefill,
            model=conn.get("model") or "",
            char_name=tour.data["character"].get("name") or "Assistant",
            user_name=tour.data["persona"]["name"],
        )
        if render is not None:
            request.prompt, stop = render(tour.data["prompt_copy"], step_prefill)
            request.stop = list(dict.fromkeys([*request.stop, *stop]))
            request.tools = []
        else:
            messages = tour.data["prompt_copy"]
            post = tour.data.get("postprocess") or {}
            mode = post.get("mode", "none")
            if mode != "none" and not is_known_mode(mode):
                # SillyTavern passes the messages through for a mode it does not know
                tour.diagnostics["postprocess"] = {"mode": mode, "unknown": True}
            elif mode != "none":
                messages = postprocess_prompt(messages, mode, char_name=post["char_name"],
                                              user_name=post["user_name"])
            request.messages = messages
        if not request.tools:
            request.params.pop("tool_choice", None)  # APIs refuse a choice among no tools
        tour.data["request"] = request
