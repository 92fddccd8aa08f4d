"""telegram: chats bound to Telegram chats, the delivery outbox, the polling lease, the
updates taken;
Telegram user ids as 64-bit integers

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":  # SQLite's INTEGER holds 64 bits already
        op.alter_column("users", "telegram_id", type_=sa.BigInteger(),
                        existing_type=sa.Integer(), existing_nullable=True)
    op.create_table(
        "telegram_chats",
        sa.Column("telegram_chat_id", sa.BigInteger(), nullable=False),
        sa.Column("chat_id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("telegram_chat_id"),
    )
    op.create_index("ix_telegram_chats_chat_id", "telegram_chats", ["chat_id"])
    op.create_table(
        "telegram_outbox",
        sa.Column("tour_id", sa.String(length=32), nullable=False),
        sa.Column("telegram_chat_id", sa.BigInteger(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("reply_to", sa.BigInteger(), nullable=True),
        sa.Column("thread_id", sa.BigInteger(), nullable=True),
        sa.Column("parts_sent", sa.Integer(), nullable=False),
        sa.Column("sent_ids", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("tour_id"),
    )
    op.create_index("ix_telegram_outbox_status", "telegram_outbox", ["status", "lease_until"])
    op.create_table(
        "telegram_updates",
        sa.Column("update_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("update_id"),
    )
    op.create_table(
        "telegram_leases",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_offset", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("telegram_leases")
    op.drop_table("telegram_updates")
    op.drop_index("ix_telegram_outbox_status", table_name="telegram_outbox")
    op.drop_table("telegram_outbox")
    op.drop_index("ix_telegram_chats_chat_id", table_name="telegram_chats")
    op.drop_table("telegram_chats")
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("users", "telegram_id", type_=sa.Integer(),
                        existing_type=sa.BigInteger(), existing_nullable=True)
