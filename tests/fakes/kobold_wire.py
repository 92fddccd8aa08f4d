"""The fake's KoboldCpp wire: /api/v1/generate, /api/extra/generate/stream (SSE
`event: message` + `{"token": …}`), /api/extra/tokencount; and llama.cpp's /tokenize.

Must not: decide what to answer (the Script does).
"""

from __future__ import annotations

import re
from typing import Any

from tests.fakes._frames import Frame, fake_tokens, sse
from tests.fakes.script import Reply


def frames(reply: Reply, body: Any) -> list[Frame]:
    out = [Frame(sse({"token": piece, "finish_reason": None}, "message"), delta=True)
           for piece in reply.pieces()]
    out.append(Frame(sse({"token": "", "finish_reason": reply.finish()}, "message")))
    return out


def whole(reply: Reply, body: Any) -> dict[str, Any]:
    return {"results": [{"text": reply.text, "finish_reason": reply.finish()}]}


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"detail": {"msg": message, "type": "service_unavailable"}}


def tokencount(body: Any) -> dict[str, Any]:
    text = str((body or {}).get("prompt", ""))
    n = fake_tokens(text)
    return {"value": n, "ids": list(range(n))}


def llamacpp_tokenize(body: Any) -> dict[str, Any]:
    text = str((body or {}).get("content", ""))
    return {"tokens": [len(m) for m in re.findall(r"\w+|[^\w\s]", text)]}


MALFORMED = 'event: message\ndata: {"token": "x", \n\n'
