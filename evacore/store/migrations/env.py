"""Alembic environment: runs on the connection handed over by `store.migrate`."""

from __future__ import annotations

from alembic import context

from evacore.store.migrate import include_object
from evacore.store.tables import Base

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reachable from the alembic CLI
    raise RuntimeError("run migrations through `evacore db upgrade`")
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    include_object=include_object,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
