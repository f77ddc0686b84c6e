"""Knowledge bases' content version, change time and chunk count kept by triggers.

The in-memory copies of small KBs (app/query/kb_vectors.py) and the answer cache are
correct only while ``knowledge_bases.content_version`` moves with every change to what a
call reads, and ``chunk_count`` (BM25's chunk total, the choice of search plan) is the real
count. Three packages bumped them by hand; a writer that forgot (a script, a new code path,
an operator's fix) left copies and cached answers stale with no error anywhere. As with
``chunk_terms`` (0004), the database now does it, whoever writes.

What a call reads of a KB, and so what bumps the version (and sets ``updated_at``, the other
half of a copy's stamp): its chunks (KB_VECTORS_SQL and FUSED_SQL read their text, section,
page, vector and model), the titles of their documents (answers name their sources), and
the KB's language (the question is stemmed in it for BM25). Hence:

- chunks inserted, deleted (cascades from a document, KB or organisation included) or
  updated: statement-level triggers with transition tables, one UPDATE per affected KB per
  statement, which also move ``chunk_count`` by the exact number of rows; TRUNCATE sets the
  count of every KB that had chunks to 0;
- a document's title changed: a row trigger whose WHEN is checked without calling a function,
  so the frequent lease and progress updates of documents cost nothing;
- a document deleted: it already bumps through its chunks; a document without chunks bumps
  too, as deleting one did before (the KB's ``updated_at`` shows the change);
- the KB's language changed (the API cannot; a raw UPDATE can).

Not covered, as no call reads them: document descriptions and statuses, the KB's title,
description and chunk sizes (they shape only future ingestion, whose chunks bump), agent
assignments (the context statement reads them on every call).

A transaction bumps a KB's version once however many of its statements change it (a
re-index deletes, inserts and renames): ``content_xact`` records the transaction that last
bumped it. Versions so stay one per committed change, as the hand-written bumps made them.

Existing counts are recomputed from the chunks; a KB whose count was off gets a new version,
as its BM25 ranking changes.

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE knowledge_bases ADD COLUMN content_xact xid8")
    # pg_current_xact_id() is the top-level transaction's id in a savepoint too, and a
    # rolled-back savepoint takes its bump and its content_xact back together.
    op.execute("""
    CREATE FUNCTION kb_content_changed(kb_ids uuid[], deltas bigint[]) RETURNS void LANGUAGE sql AS $$
        UPDATE knowledge_bases kb
        SET chunk_count = kb.chunk_count + d.delta,
            content_version = kb.content_version
                + CASE WHEN kb.content_xact IS DISTINCT FROM pg_current_xact_id() THEN 1 ELSE 0 END,
            content_xact = pg_current_xact_id(),
            updated_at = now()
        FROM unnest(kb_ids, deltas) AS d(kb_id, delta)
        WHERE kb.id = d.kb_id
    $$""")
    # A statement that changed no rows (the first index of a document deletes none) bumps
    # nothing: its transition table is empty.
    op.execute("""
    CREATE FUNCTION kb_content_of_chunks() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            PERFORM kb_content_changed(array_agg(kb_id), array_agg(n))
            FROM (SELECT kb_id, count(*) AS n FROM new_chunks GROUP BY kb_id) c
            HAVING count(*) > 0;
        ELSIF TG_OP = 'DELETE' THEN
            PERFORM kb_content_changed(array_agg(kb_id), array_agg(-n))
            FROM (SELECT kb_id, count(*) AS n FROM old_chunks GROUP BY kb_id) c
            HAVING count(*) > 0;
        ELSE
            PERFORM kb_content_changed(array_agg(kb_id), array_agg(n))
            FROM (
                SELECT kb_id, sum(n) AS n FROM (
                    SELECT kb_id, 1 AS n FROM new_chunks UNION ALL SELECT kb_id, -1 FROM old_chunks
                ) moved GROUP BY kb_id
            ) c
            HAVING count(*) > 0;
        END IF;
        RETURN NULL;
    END
    $$""")
    op.execute("""
    CREATE FUNCTION kb_content_of_truncated_chunks() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM kb_content_changed(array_agg(id), array_agg(-chunk_count::bigint))
        FROM knowledge_bases WHERE chunk_count <> 0
        HAVING count(*) > 0;
        RETURN NULL;
    END
    $$""")
    op.execute("""
    CREATE FUNCTION kb_content_of_document() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            PERFORM kb_content_changed(array_agg(kb_id), array_agg(0::bigint))
            FROM (SELECT DISTINCT kb_id FROM old_documents) d
            HAVING count(*) > 0;
        ELSE
            PERFORM kb_content_changed(ARRAY[NEW.kb_id], ARRAY[0::bigint]);
        END IF;
        RETURN NULL;
    END
    $$""")
    op.execute("""
    CREATE FUNCTION kb_content_of_language() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.content_version := OLD.content_version
            + CASE WHEN OLD.content_xact IS DISTINCT FROM pg_current_xact_id() THEN 1 ELSE 0 END;
        NEW.content_xact := pg_current_xact_id();
        NEW.updated_at := now();
        RETURN NEW;
    END
    $$""")
    op.execute("""
    CREATE TRIGGER chunks_inserted_kb_content AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION kb_content_of_chunks()
    """)
    op.execute("""
    CREATE TRIGGER chunks_deleted_kb_content AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS old_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION kb_content_of_chunks()
    """)
    # The app never updates chunks in place (re-indexing swaps them); a writer that does still
    # changes what calls read, and may move chunks between KBs.
    op.execute("""
    CREATE TRIGGER chunks_updated_kb_content AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS old_chunks NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION kb_content_of_chunks()
    """)
    op.execute("""
    CREATE TRIGGER chunks_truncated_kb_content AFTER TRUNCATE ON chunks
    FOR EACH STATEMENT EXECUTE FUNCTION kb_content_of_truncated_chunks()
    """)
    op.execute("""
    CREATE TRIGGER documents_title_kb_content AFTER UPDATE OF title ON documents
    FOR EACH ROW WHEN (OLD.title IS DISTINCT FROM NEW.title) EXECUTE FUNCTION kb_content_of_document()
    """)
    op.execute("""
    CREATE TRIGGER documents_deleted_kb_content AFTER DELETE ON documents
    REFERENCING OLD TABLE AS old_documents
    FOR EACH STATEMENT EXECUTE FUNCTION kb_content_of_document()
    """)
    op.execute("""
    CREATE TRIGGER knowledge_bases_language_content BEFORE UPDATE OF language ON knowledge_bases
    FOR EACH ROW WHEN (OLD.language IS DISTINCT FROM NEW.language) EXECUTE FUNCTION kb_content_of_language()
    """)
    op.execute("""
    UPDATE knowledge_bases kb
    SET chunk_count = c.n, content_version = kb.content_version + 1, updated_at = now()
    FROM (
        SELECT kb.id, count(ch.id) AS n
        FROM knowledge_bases kb LEFT JOIN chunks ch ON ch.kb_id = kb.id
        GROUP BY kb.id
    ) c
    WHERE kb.id = c.id AND kb.chunk_count <> c.n
    """)


def downgrade() -> None:
    op.execute("DROP TRIGGER knowledge_bases_language_content ON knowledge_bases")
    op.execute("DROP TRIGGER documents_deleted_kb_content ON documents")
    op.execute("DROP TRIGGER documents_title_kb_content ON documents")
    op.execute("DROP TRIGGER chunks_truncated_kb_content ON chunks")
    op.execute("DROP TRIGGER chunks_updated_kb_content ON chunks")
    op.execute("DROP TRIGGER chunks_deleted_kb_content ON chunks")
    op.execute("DROP TRIGGER chunks_inserted_kb_content ON chunks")
    op.execute("DROP FUNCTION kb_content_of_language()")
    op.execute("DROP FUNCTION kb_content_of_document()")
    op.execute("DROP FUNCTION kb_content_of_truncated_chunks()")
    op.execute("DROP FUNCTION kb_content_of_chunks()")
    op.execute("DROP FUNCTION kb_content_changed(uuid[], bigint[])")
    op.execute("ALTER TABLE knowledge_bases DROP COLUMN content_xact")
