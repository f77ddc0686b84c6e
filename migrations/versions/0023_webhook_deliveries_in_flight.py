"""An index of the webhook deliveries in flight, by organisation: the claim orders due
deliveries by how many of their organisation's are already being attempted, so one
organisation's slow endpoints cannot hold every delivery slot while another's wait.

Revision ID: 0023
Revises: 0022
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX ix_webhook_deliveries_in_flight ON webhook_deliveries (org_id) "
        "WHERE status = 'delivering'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX ix_webhook_deliveries_in_flight")
