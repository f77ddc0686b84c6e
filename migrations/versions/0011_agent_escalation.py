"""Escalation: what an agent does when it has no answer, and topics it hands to a human.

``agents.escalation_on_not_found`` is ``say`` (speak the not-found line, as before) or
``transfer`` (tell the runtime to hand the caller over); ``escalation_topics`` holds the
phrases, stored normalised, that transfer a caller even when the knowledge answers. Both
are read by the query path's one context statement, so they cost no round trip.

``query_log.action`` and ``query_log.transfer_reason`` record what the runtime was told;
rows logged before this migration have neither.

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE agents"
        " ADD COLUMN escalation_on_not_found varchar(10) NOT NULL DEFAULT 'say'"
        " CHECK (escalation_on_not_found IN ('say', 'transfer')),"
        " ADD COLUMN escalation_topics text[] NOT NULL DEFAULT '{}'"
    )
    op.execute("ALTER TABLE query_log ADD COLUMN action text, ADD COLUMN transfer_reason text")


def downgrade() -> None:
    op.execute("ALTER TABLE query_log DROP COLUMN transfer_reason, DROP COLUMN action")
    op.execute("ALTER TABLE agents DROP COLUMN escalation_topics, DROP COLUMN escalation_on_not_found")
