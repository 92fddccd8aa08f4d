"""SQLAlchemy table definitions for every stored record (R7).

Must not: hold queries or business rules (repositories in this package do the queries).
Schema changes go through Alembic migrations in `store/migrations/versions/`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from evacore.domain.ids import new_id, utcnow


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


def _id() -> Mapped[str]:
    return mapped_column(String(32), primary_key=True, default=new_id)


def _created() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)


def _updated() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow, nullable=False)


class User(Base):
    __tablename__ = "users"
    id: Mapped[str] = _id()
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(16))
    telegram_id: Mapped[int | None] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), nullable=True, unique=True)
    """The Telegram user id of a trusted or guest user the Telegram channel made (R14.2);
    64 bits (SQLite's INTEGER is 64 bits already)."""
    created_at: Mapped[datetime] = _created()


class ApiToken(Base):
    __tablename__ = "tokens"
    id: Mapped[str] = _id()
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = _created()
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Connection(Base):
    __tablename__ = "connections"
    id: Mapped[str] = _id()
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(32))
    base_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    api_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    model: Mapped[str | None] = mapped_column(String(300), nullable=True)
    context_size: Mapped[int] = mapped_column(Integer, default=8192)
    max_tokens: Mapped[int] = mapped_column(Integer, default=512)
    tokenizer: Mapped[str | None] = mapped_column(String(300), nullable=True)
    vision: Mapped[bool] = mapped_column(Boolean, default=False)
    prefill: Mapped[str] = mapped_column(Text, default="")
    postprocess: Mapped[str] = mapped_column(String(32), default="none")
    instruct: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class Character(Base):
    __tablename__ = "characters"
    id: Mapped[str] = _id()
    name: Mapped[str] = mapped_column(String(300))
    spec: Mapped[str] = mapped_column(String(8), default="v3")
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    extra_top: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    image: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class CharacterAsset(Base):
    __tablename__ = "character_assets"
    id: Mapped[str] = _id()
    character_id: Mapped[str] = mapped_column(
        ForeignKey("characters.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(300))
    type: Mapped[str] = mapped_column(String(64))
    ext: Mapped[str] = mapped_column(String(32), default="")
    uri: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)


class Persona(Base):
    __tablename__ = "personas"
    id: Mapped[str] = _id()
    name: Mapped[str] = mapped_column(String(300))
    description: Mapped[str] = mapped_column(Text, default="")
    user_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class Lorebook(Base):
    __tablename__ = "lorebooks"
    id: Mapped[str] = _id()
    name: Mapped[str] = mapped_column(String(300))
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """Book-level fields (scan_depth, token_budget, recursive_scanning, extensions, extra)."""
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class LoreEntry(Base):
    __tablename__ = "lore_entries"
    id: Mapped[str] = _id()
    lorebook_id: Mapped[str] = mapped_column(
        ForeignKey("lorebooks.id", ondelete="CASCADE"), index=True
    )
    uid: Mapped[int] = mapped_column(Integer)
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    __table_args__ = (UniqueConstraint("lorebook_id", "uid"),)


class LorebookLink(Base):
    __tablename__ = "lorebook_links"
    id: Mapped[str] = _id()
    lorebook_id: Mapped[str] = mapped_column(
        ForeignKey("lorebooks.id", ondelete="CASCADE"), index=True
    )
    target_kind: Mapped[str] = mapped_column(String(16))
    """`global`, `chat`, `character` or `persona`."""
    target_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    __table_args__ = (UniqueConstraint("lorebook_id", "target_kind", "target_id"),)


class Preset(Base):
    __tablename__ = "presets"
    id: Mapped[str] = _id()
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(300))
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class Chat(Base):
    __tablename__ = "chats"
    id: Mapped[str] = _id()
    title: Mapped[str] = mapped_column(String(300), default="")
    user_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    connection_id: Mapped[str | None] = mapped_column(
        ForeignKey("connections.id", ondelete="SET NULL"), nullable=True
    )
    character_id: Mapped[str | None] = mapped_column(
        ForeignKey("characters.id", ondelete="SET NULL"), nullable=True
    )
    persona_id: Mapped[str | None] = mapped_column(
        ForeignKey("personas.id", ondelete="SET NULL"), nullable=True
    )
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """Per-chat overrides: prompt order, author's note, world_info settings, postprocess…"""
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """Imported chat metadata kept verbatim (SillyTavern header)."""
    variables: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """Local macro variables, persisted across turns."""
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """Engine state per chat: lore timed effects, fit anchor."""
    turn: Mapped[int] = mapped_column(Integer, default=0)
    """Committed model answers of this chat (SPEC §1)."""
    next_position: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class Message(Base):
    __tablename__ = "messages"
    id: Mapped[str] = _id()
    chat_id: Mapped[str] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    name: Mapped[str | None] = mapped_column(String(300), nullable=True)
    content: Mapped[str] = mapped_column(Text, default="")
    """A user/system message's text; an assistant message's text lives in its variants."""
    images: Mapped[list[Any]] = mapped_column(JSON, default=list)
    active_variant_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    hidden: Mapped[bool] = mapped_column(Boolean, default=False)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = _created()
    __table_args__ = (UniqueConstraint("chat_id", "position"),)


class Variant(Base):
    __tablename__ = "variants"
    id: Mapped[str] = _id()
    message_id: Mapped[str] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), index=True
    )
    content: Mapped[str] = mapped_column(Text, default="")
    steps: Mapped[list[Any]] = mapped_column(JSON, default=list)
    finish_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="complete")
    """`complete`, `aborted` or `failed`."""
    usage: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    timings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    model: Mapped[str | None] = mapped_column(String(300), nullable=True)
    tour_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """Generation metadata incl. the diagnostic change log."""
    created_at: Mapped[datetime] = _created()


class Tour(Base):
    __tablename__ = "tours"
    id: Mapped[str] = _id()
    chat_id: Mapped[str | None] = mapped_column(
        ForeignKey("chats.id", ondelete="CASCADE"), nullable=True, index=True
    )
    user_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    mode: Mapped[str] = mapped_column(String(16), default="normal")
    status: Mapped[str] = mapped_column(String(16), default="running", index=True)
    """`running`, `completed`, `aborted`, `failed` or `interrupted`."""
    env: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    message_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    variant_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    diagnostics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    instance_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    abort_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = _created()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    __table_args__ = (Index("ix_tours_instance_running", "instance_id", "status"),)


class Setting(Base):
    __tablename__ = "settings"
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_at: Mapped[datetime] = _updated()


class SeedMeta(Base):
    __tablename__ = "seed_meta"
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_at: Mapped[datetime] = _updated()


class PluginRecord(Base):
    __tablename__ = "plugins"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_at: Mapped[datetime] = _updated()


class MemoryBlock(Base):
    __tablename__ = "memory_blocks"
    id: Mapped[str] = _id()
    scope_kind: Mapped[str] = mapped_column(String(16))
    """`chat`, `character` or `user`."""
    scope_id: Mapped[str] = mapped_column(String(32))
    label: Mapped[str] = mapped_column(String(200))
    content: Mapped[str] = mapped_column(Text, default="")
    mandatory: Mapped[bool] = mapped_column(Boolean, default=False)
    read_only: Mapped[bool] = mapped_column(Boolean, default=False)
    limit: Mapped[int] = mapped_column(Integer, default=2000)
    position: Mapped[str] = mapped_column(String(32), default="after_char")
    role: Mapped[str] = mapped_column(String(16), default="system")
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()
    __table_args__ = (Index("ix_memory_scope", "scope_kind", "scope_id"),)


class StreamRule(Base):
    __tablename__ = "stream_rules"
    id: Mapped[str] = _id()
    name: Mapped[str] = mapped_column(String(100), unique=True)
    scope: Mapped[str] = mapped_column(String(200))
    condition: Mapped[str] = mapped_column(Text, default="")
    negate: Mapped[bool] = mapped_column(Boolean, default=False)
    when: Mapped[list[Any]] = mapped_column(JSON, default=list)
    text: Mapped[str] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(16))
    repeat: Mapped[str | None] = mapped_column(String(32), nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    seed_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    seed_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _updated()


class StreamRuleStat(Base):
    """One row per firing; keyed by rule name, no foreign key: records outlive rules."""

    __tablename__ = "stream_rule_stat"
    id: Mapped[str] = _id()
    rule: Mapped[str] = mapped_column(String(100), index=True)
    chat_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    tour_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    turn: Mapped[int] = mapped_column(Integer, default=0)
    scope: Mapped[str] = mapped_column(String(200))
    retry: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = _created()
    __table_args__ = (Index("ix_rule_stat_chat", "rule", "chat_id"),)


class Instance(Base):
    """A running evacore process on this database and its last sign of life (R14.5)."""

    __tablename__ = "instances"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(255), default="")
    pid: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[datetime] = _created()
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ClientOpAnswer(Base):
    """A client op's answer posted to an instance other than the one running the tour; the
    owner picks it up within half a second (R14.5)."""

    __tablename__ = "client_op_answers"
    tour_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    call_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    content: Mapped[str] = mapped_column(Text, default="")
    is_error: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = _created()


class RequestPart(Base):
    """A large part of a provider request kept once for every tour that sent it (the tool
    definitions most requests repeat, a chat's long messages); a tour's stored request names
    it by its digest (`store/request_parts.py`). Never changed once written; a message's part
    belongs to its chat and goes with it."""

    __tablename__ = "request_parts"
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    created_at: Mapped[datetime] = _created()
    chat_id: Mapped[str | None] = mapped_column(
        ForeignKey("chats.id", ondelete="CASCADE"), nullable=True, index=True)


# The retrieval index (migration 0002) as Core tables: the memory package queries them
# through SQLAlchemy Core. Its full-text structures are made by hand in the migration, per
# database, outside this metadata (see `store.migrate.include_object`).
retrieval_documents = Table(
    "retrieval_documents", Base.metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(300), nullable=False),
    Column("scope_kind", String(16), nullable=False),
    Column("scope_id", String(32), nullable=False),
    Column("chat_id", String(32), ForeignKey("chats.id", ondelete="CASCADE"), nullable=True),
    Column("media_type", String(100), nullable=False),
    Column("size", Integer, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("chunks", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index("ix_retrieval_documents_scope", "scope_kind", "scope_id"),
)

retrieval_chunks = Table(
    "retrieval_chunks", Base.metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source_kind", String(16), nullable=False),
    Column("scope_key", String(40), nullable=False),
    Column("chat_id", String(32), ForeignKey("chats.id", ondelete="CASCADE"), nullable=True),
    Column("message_id", String(32), ForeignKey("messages.id", ondelete="CASCADE"),
           nullable=True),
    Column("document_id", String(32), ForeignKey("retrieval_documents.id", ondelete="CASCADE"),
           nullable=True),
    Column("position", Integer, nullable=False),
    Column("part", Integer, nullable=False),
    Column("label", String(300), nullable=False),
    Column("text", Text, nullable=False),
    Column("text_hash", String(32), nullable=False),
    Column("n_terms", Integer, nullable=False),
    Column("embedding", LargeBinary, nullable=True),
    Column("embedding_model", String(200), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index("ix_retrieval_chunks_scope", "scope_key", "position"),
    Index("ix_retrieval_chunks_message", "message_id"),
    Index("ix_retrieval_chunks_document", "document_id"),
    Index("ix_retrieval_chunks_chat", "chat_id"),
)


class ChatBinding(Base):
    """A conversation a client keeps on its side (the OpenAI facade's message list), bound
    to the chat that holds it: digests of the client's view of the chat, looked up by scope."""

    __tablename__ = "chat_bindings"
    chat_id: Mapped[str] = mapped_column(
        ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True
    )
    scope: Mapped[str] = mapped_column(String(64))
    """Whose conversation with what (caller, character, connection, end user), hashed."""
    full_digest: Mapped[str] = mapped_column(String(64))
    """The client's view of the whole chat, as its next request would send it back."""
    turn_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The same view without the last answer (what a regenerate sends again)."""
    updated_at: Mapped[datetime] = _updated()
    __table_args__ = (
        Index("ix_chat_bindings_full", "scope", "full_digest"),
        Index("ix_chat_bindings_turn", "scope", "turn_digest"),
    )


class TelegramChat(Base):
    """Which evacore chat a Telegram chat talks in now (R14.2); `/new` points it at a fresh one."""

    __tablename__ = "telegram_chats"
    telegram_chat_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    chat_id: Mapped[str] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16), default="private")
    """Telegram's chat type: `private`, `group`, `supergroup` or `channel`."""
    updated_at: Mapped[datetime] = _updated()


class TelegramOutbox(Base):
    """An answer saved for a Telegram chat and its delivery: written in the tour's save
    transaction, marked sent part by part, so a restart delivers what was left, once."""

    __tablename__ = "telegram_outbox"
    tour_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    telegram_chat_id: Mapped[int] = mapped_column(BigInteger)
    text: Mapped[str] = mapped_column(Text, default="")
    """The answer as it is sent (the reply tail removed); the chat stores it as written."""
    reply_to: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    thread_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    """The forum topic of a supergroup the answer goes to (None: the chat itself)."""
    parts_sent: Mapped[int] = mapped_column(Integer, default=0)
    sent_ids: Mapped[list[Any]] = mapped_column(JSON, default=list)
    """Telegram message ids of the parts sent so far."""
    status: Mapped[str] = mapped_column(String(16), default="pending")
    """`pending`, `sent` or `failed` (Telegram refused it for good)."""
    owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The instance delivering it now; another takes it over once `lease_until` passed."""
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = _created()
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    __table_args__ = (Index("ix_telegram_outbox_status", "status", "lease_until"),)


class TelegramLease(Base):
    """The polling lease (R14.2): with several instances on one database, only its holder
    calls getUpdates; the next update offset lives here, so a new holder goes on from it."""

    __tablename__ = "telegram_leases"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    next_offset: Mapped[int] = mapped_column(BigInteger, default=0)
    updated_at: Mapped[datetime] = _updated()


class TelegramUpdate(Base):
    """An update the channel has taken (by `update_id`), so a second delivery of it (a
    webhook retry, a poll after a restart) starts no second tour; kept for a day."""

    __tablename__ = "telegram_updates"
    update_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    created_at: Mapped[datetime] = _created()
