"""request parts of a chat: a long message's part belongs to the chat whose tours sent it and
is deleted with it

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("request_parts") as batch:
        batch.add_column(sa.Column("chat_id", sa.String(length=32), nullable=True))
        batch.create_foreign_key("fk_request_parts_chat_id_chats", "chats", ["chat_id"],
                                 ["id"], ondelete="CASCADE")
    op.create_index("ix_request_parts_chat_id", "request_parts", ["chat_id"])


def downgrade() -> None:
    # a chat's parts become parts of no chat: the records that name them keep their text
    op.drop_index("ix_request_parts_chat_id", table_name="request_parts")
    with op.batch_alter_table("request_parts") as batch:
        batch.drop_constraint("fk_request_parts_chat_id_chats", type_="foreignkey")
        batch.drop_column("chat_id")
