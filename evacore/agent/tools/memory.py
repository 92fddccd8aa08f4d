"""Memory tools for the model (R2.5, R5.2): `memory_append`, `memory_replace` and
`memory_rethink` edit a memory block of the tour's chat, like Letta's core-memory edits.

Must not: bypass the checks: a guest, a read-only block, a block of another chat, or a
result past the block's limit gets an `error: …` result and nothing is written.
"""

from __future__ import annotations

from typing import Any

from evacore.agent.registry import Tool, ToolContext
from evacore.domain.ids import utcnow
from evacore.errors import ToolError
from evacore.memory.blocks import (
    blocks_for_chat,
    find_for_chat,
    scopes_of_chat,
)
from evacore.store.tables import MemoryBlock

ROLES = frozenset({"trusted"})
"""Offered to trusted users and the master (a role sees the tools of the roles below it)."""

_LABEL = {"type": "string", "description": "The block's label as shown in "
          "<memory label=\"…\"> in the prompt (or its id)."}


async def _edit(ctx: ToolContext, label: str, change: Any) -> str:
    if ctx.role not in ("master", "trusted"):
        raise ToolError(f"the {ctx.role} role may not edit memory")
    core = ctx.service("core")
    if not ctx.chat_id:
        raise ToolError("memory tools need a chat")
    async with core.session() as s:
        scopes = await scopes_of_chat(s, ctx.chat_id)
        block = find_for_chat(await blocks_for_chat(s, scopes), label)
        if block is None:
            other = await s.get(MemoryBlock, label)
            if other is not None:
                raise ToolError(f"memory block {label} does not belong to this chat")
            known = ", ".join(sorted({b.label for b in await blocks_for_chat(s, scopes)}))
            raise ToolError(f"no memory block labelled {label!r} in this chat"
                            + (f"; blocks: {known}" if known else "; this chat has none"))
        if block.read_only:
            raise ToolError(f"memory block {block.label!r} is read-only")
        new = change(block.content)
        if len(new) > block.limit:
            raise ToolError(
                f"memory block {block.label!r} would have {len(new)} characters, over its "
                f"limit of {block.limit}; nothing was changed (shorten it with memory_rethink)"
            )
        block.content = new
        block.updated_at = utcnow()
        await s.flush()
        label_now, size, limit = block.label, len(new), block.limit
    tour = ctx.services.get("tour")
    diagnostics = getattr(tour, "diagnostics", None)
    if isinstance(diagnostics, dict):
        edits = diagnostics.setdefault("memory", {}).setdefault("edits", [])
        edits.append({"block": label_now, "chars": size, "call_id": ctx.call_id})
    return (f"memory block {label_now!r} saved ({size}/{limit} characters); "
            "the prompt shows it from the next turn")


async def memory_append(args: dict[str, Any], ctx: ToolContext) -> str:
    text = str(args["text"])
    if not text:
        raise ToolError("text is empty")
    return await _edit(ctx, args["label"], lambda old: f"{old}\n{text}" if old else text)


async def memory_replace(args: dict[str, Any], ctx: ToolContext) -> str:
    old, new = str(args["old"]), str(args["new"])
    if not old:
        raise ToolError("old is empty; use memory_append to add text")

    def change(content: str) -> str:
        count = content.count(old)
        if count == 0:
            raise ToolError("the text to replace was not found in the block")
        if count > 1:
            raise ToolError(f"the text to replace occurs {count} times; give a longer, "
                            "unique piece")
        return content.replace(old, new, 1)

    return await _edit(ctx, args["label"], change)


async def memory_rethink(args: dict[str, Any], ctx: ToolContext) -> str:
    content = str(args["content"])
    return await _edit(ctx, args["label"], lambda _old: content)


def _tool(name: str, description: str, props: dict[str, Any], handler: Any) -> Tool:
    return Tool(
        name=name, description=description,
        parameters={"type": "object", "properties": {"label": _LABEL, **props},
                    "required": ["label", *props], "additionalProperties": False},
        handler=handler, roles=ROLES, kind="memory", timeout=30.0,
    )


def memory_tools() -> list[Tool]:
    return [
        _tool("memory_append",
              "Add a line of text at the end of a memory block (kept in every later prompt).",
              {"text": {"type": "string", "description": "The text to add."}}, memory_append),
        _tool("memory_replace",
              "Replace one exact piece of a memory block's text with new text (empty new "
              "text deletes the piece).",
              {"old": {"type": "string", "description": "The exact text now in the block."},
               "new": {"type": "string", "description": "The text to put instead."}},
              memory_replace),
        _tool("memory_rethink",
              "Rewrite a memory block completely (to reorganise or shorten it).",
              {"content": {"type": "string", "description": "The block's whole new text."}},
              memory_rethink),
    ]
