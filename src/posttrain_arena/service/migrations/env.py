"""Alembic environment: migrations run on the connection handed over in the config."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from posttrain_arena.service.models import Base

config = context.config
target_metadata = Base.metadata


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        # `alembic` command line use: the URL comes from -x url=... or the settings.
        url = context.get_x_argument(as_dictionary=True).get("url")
        if url is None:
            from posttrain_arena.service.config import Settings

            url = Settings().resolved_database_url
        with create_engine(url).begin() as conn:
            context.configure(connection=conn, target_metadata=target_metadata,
                              render_as_batch=True)
            context.run_migrations()
        return
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=True)
    context.run_migrations()


run()
