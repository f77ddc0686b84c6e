"""Spoken attribution: an agent may have its answers name their source aloud, and every
reply records the chunks it was read from.

``agents.attribution`` is ``off`` (the answer as before) or ``spoken`` ("According to our
returns policy, ..."); it is read by the query path's one context statement, so it costs
no round trip. ``query_log.used_sources`` holds the chunk ids the answer was read from
(``used_sources`` of the reply); rows logged before this migration have none (NULL), which
is not the same as a reply that rests on nothing (an empty array).

Revision ID: 0017
Revises: 0016
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE agents ADD COLUMN attribution varchar(10) NOT NULL DEFAULT 'off'"
        " CHECK (attribution IN ('off', 'spoken'))"
    )
    op.execute("ALTER TABLE query_log ADD COLUMN used_sources bigint[]")


def downgrade() -> None:
    op.execute("ALTER TABLE query_log DROP COLUMN used_sources")
    op.execute("ALTER TABLE agents DROP COLUMN attribution")
