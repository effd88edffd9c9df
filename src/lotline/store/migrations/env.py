"""Alembic environment: always runs on a connection handed in by lotline.store.migrate."""

from __future__ import annotations

from alembic import context

from lotline.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("lotline migrations run through lotline.store.migrate (or `lotline db upgrade`)")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
