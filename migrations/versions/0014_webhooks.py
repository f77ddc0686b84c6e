"""Webhooks: endpoints an organisation registers, and an outbox of events to deliver to them.

An event is written in the same transaction as the change it reports, so a committed change
always has its event and a rolled-back one never does; the worker process delivers the
outbox afterwards, retrying as long as the settings allow. Document status changes are
enqueued by a trigger, as the content version is (0009): every writer (upload, the worker's
lease, re-sync, an operator's UPDATE) reports them without remembering to.

``enqueue_webhook_event(org_id, event_type, data)`` is the one way in, for triggers and code
alike: it writes the event and one delivery per active endpoint of the organisation
subscribed to the type (or to ``*``), and writes nothing when there is none, so
organisations without webhooks store nothing. It returns the event's id, or NULL.

Deliveries are their own queue, leased like documents (``FOR UPDATE SKIP LOCKED`` and an
expiry), and a notification on ``vk_webhooks`` wakes the worker at commit.

Revision ID: 0014
Revises: 0013
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("""
    CREATE TABLE webhook_endpoints (
        id uuid PRIMARY KEY,
        org_id uuid NOT NULL REFERENCES organisations(id) ON DELETE CASCADE,
        url varchar(2048) NOT NULL,
        description varchar(2000) NOT NULL DEFAULT '',
        events text[] NOT NULL CHECK (cardinality(events) > 0),
        active boolean NOT NULL DEFAULT true,
        secret varchar(100) NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz
    )""")
    op.execute("CREATE INDEX ix_webhook_endpoints_org ON webhook_endpoints (org_id, created_at)")
    op.execute("""
    CREATE TABLE webhook_events (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        org_id uuid NOT NULL REFERENCES organisations(id) ON DELETE CASCADE,
        type varchar(100) NOT NULL,
        data jsonb NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
    )""")
    op.execute("CREATE INDEX ix_webhook_events_created ON webhook_events (created_at)")
    op.execute("""
    CREATE TABLE webhook_deliveries (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        org_id uuid NOT NULL REFERENCES organisations(id) ON DELETE CASCADE,
        endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
        event_id uuid NOT NULL REFERENCES webhook_events(id) ON DELETE CASCADE,
        status varchar(16) NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'delivering', 'delivered', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL DEFAULT now(),
        lease_owner varchar(100),
        lease_expires_at timestamptz,
        last_status_code integer,
        last_error varchar(2000),
        created_at timestamptz NOT NULL DEFAULT now(),
        last_attempt_at timestamptz,
        finished_at timestamptz
    )""")
    # The queue: due deliveries, and leases of workers that died.
    op.execute(
        "CREATE INDEX ix_webhook_deliveries_due ON webhook_deliveries (next_attempt_at)"
        " WHERE status IN ('pending', 'delivering')"
    )
    op.execute("CREATE INDEX ix_webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at)")
    op.execute("CREATE INDEX ix_webhook_deliveries_event ON webhook_deliveries (event_id)")
    op.execute("""
    CREATE FUNCTION enqueue_webhook_event(org_id uuid, event_type text, data jsonb)
    RETURNS uuid LANGUAGE plpgsql AS $$
    DECLARE
        event_id uuid;
    BEGIN
        PERFORM 1 FROM webhook_endpoints e
        WHERE e.org_id = enqueue_webhook_event.org_id AND e.active
          AND (event_type = ANY (e.events) OR '*' = ANY (e.events));
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        INSERT INTO webhook_events (org_id, type, data)
        VALUES (enqueue_webhook_event.org_id, event_type, data)
        RETURNING id INTO event_id;
        INSERT INTO webhook_deliveries (org_id, endpoint_id, event_id)
        SELECT e.org_id, e.id, event_id FROM webhook_endpoints e
        WHERE e.org_id = enqueue_webhook_event.org_id AND e.active
          AND (event_type = ANY (e.events) OR '*' = ANY (e.events));
        PERFORM pg_notify('vk_webhooks', '');
        RETURN event_id;
    END
    $$""")
    op.execute("""
    CREATE FUNCTION webhook_document_status() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM enqueue_webhook_event(NEW.org_id, 'document.status_changed', jsonb_build_object(
            'document_id', NEW.id,
            'knowledge_base_id', NEW.kb_id,
            'title', NEW.title,
            'status', NEW.status,
            'previous_status', CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END,
            'error', NEW.error,
            'chunk_count', NEW.chunk_count,
            'pages_total', NEW.pages_total,
            'pages_skipped', NEW.pages_skipped
        ));
        RETURN NULL;
    END
    $$""")
    op.execute("""
    CREATE TRIGGER documents_created_webhook AFTER INSERT ON documents
    FOR EACH ROW EXECUTE FUNCTION webhook_document_status()
    """)
    # A worker retaking an expired lease writes 'processing' over 'processing': no change.
    op.execute("""
    CREATE TRIGGER documents_status_webhook AFTER UPDATE OF status ON documents
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION webhook_document_status()
    """)


def downgrade() -> None:
    op.execute("DROP TRIGGER documents_status_webhook ON documents")
    op.execute("DROP TRIGGER documents_created_webhook ON documents")
    op.execute("DROP FUNCTION webhook_document_status()")
    op.execute("DROP FUNCTION enqueue_webhook_event(uuid, text, jsonb)")
    op.execute("DROP TABLE webhook_deliveries")
    op.execute("DROP TABLE webhook_events")
    op.execute("DROP TABLE webhook_endpoints")
