"""retrieval index: documents, chunks, full-text search (FTS5 on SQLite, tsvector on PostgreSQL)

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_SQLITE_FTS = (
    ("CREATE VIRTUAL TABLE retrieval_fts USING fts5(text, scope_key, content='retrieval_chunks', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 0')"),
    "CREATE VIRTUAL TABLE retrieval_fts_terms USING fts5vocab(retrieval_fts, 'row')",
    "INSERT INTO retrieval_fts(retrieval_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)')",
    ("CREATE TRIGGER retrieval_chunks_ai AFTER INSERT ON retrieval_chunks BEGIN "
    "INSERT INTO retrieval_fts(rowid, text, scope_key) VALUES (new.id, new.text, new.scope_key); "
    "END"),
    ("CREATE TRIGGER retrieval_chunks_ad AFTER DELETE ON retrieval_chunks BEGIN "
    "INSERT INTO retrieval_fts(retrieval_fts, rowid, text, scope_key) "
    "VALUES ('delete', old.id, old.text, old.scope_key); END"),
    ("CREATE TRIGGER retrieval_chunks_au AFTER UPDATE OF text, scope_key ON retrieval_chunks "
    "BEGIN INSERT INTO retrieval_fts(retrieval_fts, rowid, text, scope_key) "
    "VALUES ('delete', old.id, old.text, old.scope_key); "
    "INSERT INTO retrieval_fts(rowid, text, scope_key) VALUES (new.id, new.text, new.scope_key); "
    "END"),
)
_SQLITE_FTS_DROP = (
    "DROP TRIGGER IF EXISTS retrieval_chunks_au",
    "DROP TRIGGER IF EXISTS retrieval_chunks_ad",
    "DROP TRIGGER IF EXISTS retrieval_chunks_ai",
    "DROP TABLE IF EXISTS retrieval_fts_terms",
    "DROP TABLE IF EXISTS retrieval_fts",
)
_PG_FTS = (
    ("ALTER TABLE retrieval_chunks ADD COLUMN tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED"),
    "CREATE INDEX ix_retrieval_chunks_tsv ON retrieval_chunks USING gin (tsv)",
)


def upgrade() -> None:
    op.create_table(
        "retrieval_documents",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=300), nullable=False),
        sa.Column("scope_kind", sa.String(length=16), nullable=False),
        sa.Column("scope_id", sa.String(length=32), nullable=False),
        sa.Column("chat_id", sa.String(length=32), nullable=True),
        sa.Column("media_type", sa.String(length=100), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_retrieval_documents_scope", "retrieval_documents",
                    ["scope_kind", "scope_id"])
    op.create_table(
        "retrieval_chunks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("source_kind", sa.String(length=16), nullable=False),
        sa.Column("scope_key", sa.String(length=40), nullable=False),
        sa.Column("chat_id", sa.String(length=32), nullable=True),
        sa.Column("message_id", sa.String(length=32), nullable=True),
        sa.Column("document_id", sa.String(length=32), nullable=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=300), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("text_hash", sa.String(length=32), nullable=False),
        sa.Column("n_terms", sa.Integer(), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=True),
        sa.Column("embedding_model", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["message_id"], ["messages.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["document_id"], ["retrieval_documents.id"],
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_retrieval_chunks_scope", "retrieval_chunks", ["scope_key", "position"])
    op.create_index("ix_retrieval_chunks_message", "retrieval_chunks", ["message_id"])
    op.create_index("ix_retrieval_chunks_document", "retrieval_chunks", ["document_id"])
    op.create_index("ix_retrieval_chunks_chat", "retrieval_chunks", ["chat_id"])
    statements = _SQLITE_FTS if op.get_bind().dialect.name == "sqlite" else _PG_FTS
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in _SQLITE_FTS_DROP:
            op.execute(statement)
    op.drop_index("ix_retrieval_chunks_chat", table_name="retrieval_chunks")
    op.drop_index("ix_retrieval_chunks_document", table_name="retrieval_chunks")
    op.drop_index("ix_retrieval_chunks_message", table_name="retrieval_chunks")
    op.drop_index("ix_retrieval_chunks_scope", table_name="retrieval_chunks")
    op.drop_table("retrieval_chunks")
    op.drop_index("ix_retrieval_documents_scope", table_name="retrieval_documents")
    op.drop_table("retrieval_documents")
