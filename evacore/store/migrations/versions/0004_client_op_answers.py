"""client_op_answers: client op answers relayed between instances (R14.5)

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "client_op_answers",
        sa.Column("tour_id", sa.String(length=32), nullable=False),
        sa.Column("call_id", sa.String(length=200), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("is_error", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tour_id", "call_id"),
    )


def downgrade() -> None:
    op.drop_table("client_op_answers")
