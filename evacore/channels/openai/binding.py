"""Which chat a request's conversation is (R14.1): a continued chat, a regenerate of its last
answer, a new chat holding the conversation so far, or the chat `X-Evacore-Chat` names.

A chat is matched by digests of what the client has seen of it (roles and text, tool calls
and results), written after every answer. Must not: run tours or build prompts; it stores
the imported history and the client's tool results, then says how the tour starts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evacore.channels.openai.conversation import Conversation, Turn
from evacore.channels.openai.errors import FacadeError
from evacore.store import bindings
from evacore.store import chats as chat_store
from evacore.store.tables import Chat

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from evacore.channels.openai.models import Target
    from evacore.core import Core
    from evacore.domain.roles import Identity

TITLE_CHARS = 80


@dataclass
class Plan:
    """How the tour for this request starts, and what to remember after it."""

    chat_id: str
    scope: str
    mode: str = "normal"
    text: str = ""
    images: list[str] = field(default_factory=list)
    resume: bool = False
    how: str = "new"
    """`continue`, `regenerate`, `new` or `named` (diagnostics; docs/openai.md)."""


def scope_of(who: Identity, target: Target, end_user: str | None) -> str:
    """Chats are matched only among one caller's chats with one character on one
    connection (and one end user, OpenAI's `user` field)."""
    return _scope(who.user_id, target.character_id, target.connection_id, end_user)


def _scope(user_id: str, character_id: str | None, connection_id: str | None,
           end_user: str | None) -> str:
    raw = "\x00".join((user_id, character_id or "", connection_id or "", end_user or ""))
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


async def plan_for(s: AsyncSession, who: Identity, target: Target, conv: Conversation, *,
                   named: str | None, end_user: str | None) -> Plan:
    """Find or create the chat and put the client's tool results in it (in the caller's
    transaction)."""
    scope = scope_of(who, target, end_user)
    whole = conv.digest()
    if named is not None:
        plan = await _named(s, who, named, whole, end_user)
    else:
        plan = await _matched(s, scope, conv, whole)
    if plan is None:
        # bound once its answer is known (`record`): until then it matches no other request
        chat = await _new_chat(s, who, target, conv)
        plan = Plan(chat.id, scope)
    if plan.mode == "normal":
        if conv.ends_with_results:
            stored = await chat_store.attach_results(s, plan.chat_id, conv.results)
            if not stored:
                raise FacadeError(400, "The tool messages answer no pending tool call of "
                                  "this chat.", code="invalid_value", param="messages")
            plan.resume = True
        else:
            plan.text, plan.images = conv.text, list(conv.images)
    return plan


async def _named(s: AsyncSession, who: Identity, chat_id: str, whole: str,
                 end_user: str | None) -> Plan:
    """The chat runs with its own character and connection whatever the request's `model`
    says, so it is bound (`record`) under those: a later request for the model it was named
    with does not find it."""
    found = await bindings.named_chat(s, chat_id)
    if found is None or (not who.is_master and found[0] != who.user_id):
        raise FacadeError(404, f"The chat `{chat_id}` named by X-Evacore-Chat does not exist.",
                          code="chat_not_found", param=None)
    _owner, turn, character_id, connection_id = found
    scope = _scope(who.user_id, character_id, connection_id, end_user)
    if turn == whole:
        return Plan(chat_id, scope, mode="regenerate", how="named")
    return Plan(chat_id, scope, how="named")


async def _matched(s: AsyncSession, scope: str, conv: Conversation, whole: str) -> Plan | None:
    found = await bindings.find_chat(s, scope, full=conv.digest(prior=True))
    if found is not None:
        return Plan(found, scope, how="continue")
    found = await bindings.find_chat(s, scope, turn=whole)
    if found is not None:
        return Plan(found, scope, mode="regenerate", how="regenerate")
    return None


async def _new_chat(s: AsyncSession, who: Identity, target: Target,
                    conv: Conversation) -> Chat:
    """A chat with the conversation so far as its messages (no greeting: the client never
    saw one)."""
    first = next((t.text.strip() for t in conv.turns if t.role == "user" and t.text.strip()), "")
    title = first[:TITLE_CHARS] or target.character_name or "Chat"
    chat = Chat(title=title, connection_id=target.connection_id,
                character_id=target.character_id, user_id=who.user_id, settings={})
    s.add(chat)
    await s.flush()
    speaker = target.character_name or "Assistant"
    prior, i = conv.prior, 0
    answers = 0
    while i < len(prior):
        turn = prior[i]
        i += 1
        if turn.role == "user":
            await chat_store.add_message(s, chat, role="user", content=turn.text,
                                         images=list(turn.images), name="User", flush=False)
            continue
        if turn.role == "tool":
            raise FacadeError(400, f"A tool message answers '{turn.tool_call_id}', which is "
                              "not a tool call of the assistant message before it.",
                              code="invalid_value", param="messages")
        msg = await chat_store.add_message(s, chat, role="assistant", name=speaker, flush=False)
        answers += 1
        if not turn.tool_calls:
            await chat_store.add_variant(s, msg, content=turn.text, finish_reason="imported",
                                         flush=False)
            continue
        ids = {c[0] for c in turn.tool_calls}
        results: list[dict[str, Any]] = []
        while i < len(prior) and prior[i].role == "tool":
            if prior[i].tool_call_id not in ids:
                break
            results.append({"id": prior[i].tool_call_id, "content": prior[i].text})
            i += 1
        step = {"text": turn.text, "finish_reason": "tool_calls", "results": results,
                "tool_calls": [{"id": cid, "name": name, "arguments": args, "external": True}
                               for cid, name, args in turn.tool_calls]}
        await chat_store.add_variant(s, msg, content="", steps=[step],
                                     finish_reason="tool_calls", flush=False)
    chat.turn = answers
    await s.flush()
    return chat


def seen_digest(conv: Conversation, answer: Turn | None) -> str:
    """The digest of what the client has seen: its conversation plus the answer (or, after a
    failure, without one)."""
    return conv.digest(answer)


async def record(core: Core, plan: Plan, conv: Conversation, answer: Turn | None) -> None:
    """Remember what the client has now seen of the chat, so its next request finds it."""
    async with core.session() as s:
        await record_in(s, plan, conv, seen_digest(conv, answer))


async def record_in(s: AsyncSession, plan: Plan, conv: Conversation, seen: str) -> None:
    """`record` in the caller's transaction (the tour's save), `seen` from `seen_digest`."""
    await bindings.bind(s, plan.chat_id, plan.scope, full=seen, turn=conv.digest())
