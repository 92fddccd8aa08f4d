"""request parts: the tool definitions (and long messages) of provider requests, kept once
for the tours that sent them

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "request_parts",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("digest"),
    )


def downgrade() -> None:
    # the tours' records take their parts back inline before the parts go
    bind = op.get_bind()
    parts = sa.table("request_parts", sa.column("digest", sa.String()),
                     sa.column("value", sa.JSON()))
    tours = sa.table("tours", sa.column("id", sa.String()), sa.column("diagnostics", sa.JSON()))
    stored = dict(bind.execute(sa.select(parts.c.digest, parts.c.value)).all())
    if stored:
        named = bind.execute(sa.select(tours.c.id, tours.c.diagnostics).where(
            sa.cast(tours.c.diagnostics, sa.Text()).like('%"$request_part"%'))).all()
        for tour_id, diagnostics in named:
            for request in diagnostics.get("requests") or []:
                body = request.get("body") if isinstance(request, dict) else None
                for key, value in list(body.items()) if isinstance(body, dict) else []:
                    if isinstance(value, dict) and value.get("$request_part") in stored:
                        body[key] = stored[value["$request_part"]]
                    elif isinstance(value, list):  # the messages, each long one a part
                        body[key] = [stored[item["$request_part"]] if isinstance(item, dict)
                                     and item.get("$request_part") in stored else item
                                     for item in value]
            bind.execute(sa.update(tours).where(tours.c.id == tour_id)
                         .values(diagnostics=diagnostics))
    op.drop_table("request_parts")
