"""Memory blocks: named texts bound to a chat, a character or a user, with a size limit;
stored in `memory_blocks`, rendered into every prompt of the chats they belong to.

Must not: decide who may edit (routes check the master, tools check role and flags) or
place blocks in a prompt (the memory stage does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Select, bindparam, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import utcnow
from evacore.errors import Conflict, InvalidInput, NotFound
from evacore.store import direct
from evacore.store.tables import Chat, MemoryBlock

SCOPES = ("chat", "character", "user")
SCOPE_ORDER = {"user": 0, "character": 1, "chat": 2}
"""Prompt order of blocks: the user's, then the character's, then the chat's own."""
POSITION_RE = re.compile(r"^(after_char|before_char|top|depth:\d{1,3})$")
DEFAULT_POSITION = "after_char"


class LimitExceeded(InvalidInput):
    """The memory block's content is longer than its limit."""

    code = "memory_limit"


@dataclass(frozen=True, slots=True)
class ChatScopes:
    """The scopes whose blocks appear in one chat's prompts."""

    chat_id: str
    character_id: str | None
    user_id: str | None

    def pairs(self) -> list[tuple[str, str]]:
        out = [("chat", self.chat_id)]
        if self.character_id:
            out.append(("character", self.character_id))
        if self.user_id:
            out.append(("user", self.user_id))
        return out

    def holds(self, block: MemoryBlock) -> bool:
        return (block.scope_kind, block.scope_id) in self.pairs()


async def scopes_of_chat(s: AsyncSession, chat_id: str) -> ChatScopes:
    chat = await s.get(Chat, chat_id)
    if chat is None:
        raise NotFound(f"chat {chat_id} not found")
    return ChatScopes(chat.id, chat.character_id, chat.user_id)


def check_content(content: str, limit: int) -> None:
    if len(content) > limit:
        raise LimitExceeded(
            f"the content has {len(content)} characters but the block's limit is {limit}",
            length=len(content), limit=limit,
        )


async def _label_taken(s: AsyncSession, scope_kind: str, scope_id: str, label: str,
                       except_id: str | None = None) -> bool:
    stmt = select(MemoryBlock.id).where(
        MemoryBlock.scope_kind == scope_kind, MemoryBlock.scope_id == scope_id,
        MemoryBlock.label == label,
    )
    found = (await s.scalars(stmt)).all()
    return any(i != except_id for i in found)


async def create_block(s: AsyncSession, *, scope_kind: str, scope_id: str, label: str,
                       content: str = "", mandatory: bool = False, read_only: bool = False,
                       limit: int = 2000, position: str = DEFAULT_POSITION,
                       role: str = "system") -> MemoryBlock:
    if scope_kind not in SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(SCOPES)}")
    if not POSITION_RE.match(position):
        raise InvalidInput("position must be after_char, before_char, top or depth:<n>")
    check_content(content, limit)
    if await _label_taken(s, scope_kind, scope_id, label):
        raise Conflict(f"this {scope_kind} already has a memory block labelled {label!r}")
    block = MemoryBlock(scope_kind=scope_kind, scope_id=scope_id, label=label, content=content,
                        mandatory=mandatory, read_only=read_only, limit=limit,
                        position=position, role=role)
    s.add(block)
    await s.flush()
    return block


async def get_block(s: AsyncSession, block_id: str) -> MemoryBlock:
    block = await s.get(MemoryBlock, block_id)
    if block is None:
        raise NotFound(f"memory block {block_id} not found")
    return block


async def update_block(s: AsyncSession, block: MemoryBlock, changes: dict[str, Any]) -> MemoryBlock:
    """Apply changed fields (label, content, mandatory, read_only, limit, position, role)."""
    position = changes.get("position")
    if position is not None and not POSITION_RE.match(position):
        raise InvalidInput("position must be after_char, before_char, top or depth:<n>")
    limit = changes.get("limit", block.limit)
    content = changes.get("content", block.content)
    check_content(content, limit)
    label = changes.get("label")
    if label is not None and label != block.label and await _label_taken(
        s, block.scope_kind, block.scope_id, label, except_id=block.id
    ):
        raise Conflict(f"this {block.scope_kind} already has a memory block labelled {label!r}")
    for key, value in changes.items():
        setattr(block, key, value)
    block.updated_at = utcnow()
    await s.flush()
    return block


async def list_blocks(s: AsyncSession, scope_kind: str | None = None,
                      scope_id: str | None = None) -> list[MemoryBlock]:
    stmt = select(MemoryBlock)
    if scope_kind is not None:
        stmt = stmt.where(MemoryBlock.scope_kind == scope_kind, MemoryBlock.scope_id == scope_id)
    rows = (await s.scalars(stmt.order_by(MemoryBlock.created_at, MemoryBlock.id))).all()
    return list(rows)


def _in_scopes(scopes: int) -> Any:
    """The condition of a block in one of `scopes` scopes (`_scope_params` names them)."""
    c = MemoryBlock.__table__.c
    return or_(*((c.scope_kind == bindparam(f"p_kind_{n}")) & (c.scope_id == bindparam(f"p_id_{n}"))
                 for n in range(scopes)))


def _scope_params(pairs: list[tuple[str, str]]) -> dict[str, str]:
    params = {}
    for n, (kind, scope_id) in enumerate(pairs):
        params[f"p_kind_{n}"], params[f"p_id_{n}"] = kind, scope_id
    return params


def _prompt_order(block: MemoryBlock | BlockView) -> tuple[int, Any, str]:
    """User, character, chat; then by creation."""
    return SCOPE_ORDER.get(block.scope_kind, 9), block.created_at, block.id


@cache
def _blocks_statement(scopes: int) -> Select[tuple[MemoryBlock]]:
    """Built once per number of scopes: a tour's read costs no statement construction."""
    return select(MemoryBlock).where(_in_scopes(scopes))


@dataclass(frozen=True, slots=True)
class BlockView:
    """What a prompt shows of a memory block (read for the prompt, never written back)."""

    id: str
    scope_kind: str
    scope_id: str
    label: str
    content: str
    mandatory: bool
    read_only: bool
    limit: int
    position: str | None
    role: str | None
    created_at: Any


_VIEW_COLUMNS = tuple(MemoryBlock.__table__.c[name] for name in BlockView.__slots__)


@cache
def _views_statement(scopes: int) -> Select[Any]:
    """`_blocks_statement` for the columns of a `BlockView`, built once per number of scopes."""
    return select(*_VIEW_COLUMNS).where(_in_scopes(scopes))


async def block_views_for_chat(s: AsyncSession, scopes: ChatScopes) -> list[BlockView]:
    """`blocks_for_chat` as views, read with a statement run on the driver
    (`store/direct.py`): the memory stage's read, in a tour's lean session, without the
    ordinary session the ORM's entities would open."""
    pairs = scopes.pairs()
    rows = await direct.execute(s, _views_statement(len(pairs)), _scope_params(pairs))
    return sorted((BlockView(*row) for row in rows), key=_prompt_order)


async def blocks_for_chat(s: AsyncSession, scopes: ChatScopes) -> list[MemoryBlock]:
    """Every block in this chat's prompts, in prompt order (user, character, chat; then by
    creation)."""
    pairs = scopes.pairs()
    rows = (await s.scalars(_blocks_statement(len(pairs)), _scope_params(pairs))).all()
    return sorted(rows, key=_prompt_order)


def find_for_chat(blocks: list[MemoryBlock], name: str) -> MemoryBlock | None:
    """The block a tool call names: by id, else by label, the most specific scope first."""
    for b in blocks:
        if b.id == name:
            return b
    labelled = [b for b in blocks if b.label == name]
    labelled.sort(key=lambda b: -SCOPE_ORDER.get(b.scope_kind, 0))
    return labelled[0] if labelled else None


def render_block(block: MemoryBlock | BlockView, content: str | None = None) -> str:
    """The text a block puts into the prompt: its label, fill and flags, then its content."""
    body = block.content if content is None else content
    flags = ' read_only="true"' if block.read_only else ""
    label = block.label.replace('"', "'")
    return (f'<memory label="{label}" chars="{len(block.content)}/{block.limit}"{flags}>\n'
            f"{body}\n</memory>")


def block_json(block: MemoryBlock) -> dict[str, Any]:
    scope_field = {"chat": "chat_id", "character": "character_id", "user": "user_id"}
    return {
        "id": block.id,
        "scope": block.scope_kind,
        scope_field.get(block.scope_kind, "scope_id"): block.scope_id,
        "label": block.label,
        "content": block.content,
        "chars": len(block.content),
        "limit": block.limit,
        "mandatory": block.mandatory,
        "read_only": block.read_only,
        "position": block.position,
        "role": block.role,
        "created_at": block.created_at.isoformat() if block.created_at else None,
        "updated_at": block.updated_at.isoformat() if block.updated_at else None,
    }
