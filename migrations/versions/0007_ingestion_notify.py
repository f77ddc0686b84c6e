"""Wake ingestion workers in other processes the moment a document is queued.

Workers in the service process were woken directly; a ``vk worker`` process (the default
beside ``vk serve`` now) only polled, once a second. A trigger notifies the channel
``vk_ingest`` whenever a document becomes pending, whoever wrote it (upload, re-sync,
a released lease), so every listening worker claims it at once. PostgreSQL folds identical
notifications of one transaction into one, so a bulk insert sends one.

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("""
    CREATE FUNCTION notify_ingestion_queued() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('vk_ingest', '');
        RETURN NULL;
    END
    $$
    """)
    op.execute("""
    CREATE TRIGGER documents_queued_insert AFTER INSERT ON documents
    FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION notify_ingestion_queued()
    """)
    op.execute("""
    CREATE TRIGGER documents_queued_update AFTER UPDATE OF status ON documents
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status IS DISTINCT FROM 'pending')
    EXECUTE FUNCTION notify_ingestion_queued()
    """)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS documents_queued_update ON documents")
    op.execute("DROP TRIGGER IF EXISTS documents_queued_insert ON documents")
    op.execute("DROP FUNCTION IF EXISTS notify_ingestion_queued()")
