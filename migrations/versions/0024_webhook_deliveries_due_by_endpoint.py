"""The webhook queue's due deliveries indexed by endpoint: the claim reads each active
endpoint's earliest due deliveries in order, instead of sorting every due delivery.

Revision ID: 0024
Revises: 0023
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX ix_webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt_at)"
        " WHERE status IN ('pending', 'delivering')"
    )
    op.execute("DROP INDEX ix_webhook_deliveries_due")


def downgrade() -> None:
    op.execute(
        "CREATE INDEX ix_webhook_deliveries_due ON webhook_deliveries (next_attempt_at)"
        " WHERE status IN ('pending', 'delivering')"
    )
    op.execute("DROP INDEX ix_webhook_deliveries_endpoint_due")
