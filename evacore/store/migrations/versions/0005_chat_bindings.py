"""chat bindings: a client-side conversation (the OpenAI facade) bound to its chat

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chat_bindings",
        sa.Column("chat_id", sa.String(length=32), nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("full_digest", sa.String(length=64), nullable=False),
        sa.Column("turn_digest", sa.String(length=64), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("chat_id"),
    )
    op.create_index("ix_chat_bindings_full", "chat_bindings", ["scope", "full_digest"])
    op.create_index("ix_chat_bindings_turn", "chat_bindings", ["scope", "turn_digest"])


def downgrade() -> None:
    op.drop_index("ix_chat_bindings_turn", table_name="chat_bindings")
    op.drop_index("ix_chat_bindings_full", table_name="chat_bindings")
    op.drop_table("chat_bindings")
