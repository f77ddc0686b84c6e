"""SQL of the query path. Every statement is scoped by organisation and agent through
the agent's assignments; they run on raw asyncpg connections because they are the hot
path: one round trip for the agent's knowledge bases, the answer cache and BM25, one for
the vector search (none when the KBs are held in memory).
"""

from __future__ import annotations

# BM25 (k1 = 1.2, b = 0.75) over chunk_terms (migration 0004), as common table expressions
# ending in ``bm25`` (id, rank; best first, at most {limit} rows). The question's lexemes in
# each text-search language of the KBs ({languages}: rows of a language and the ids of its
# KBs), each looked up in the KBs stemmed in that language: an agent with an English and a
# French KB finds "chevaux" in the French one (stemmed "cheval") and "mornings" in the English
# one (stemmed "morn"). Each lexeme's document frequency among the agent's chunks ({total}
# chunks in all) gives its weight, so rare words count and common ones barely do; a spoken
# question rarely holds every word of the answer, so any matching lexeme scores. Document
# length is the chunk's token count against the mean of the chunks that matched. No lexeme is
# read unless {gate} holds; only chunks for which {visible} holds are ranked (the words'
# weights and the mean length are the whole KBs': a filter narrows what is returned, not
# how rare a word is). The arithmetic is float8: integer columns and bare decimal
# constants would make it numeric: a fifth more time over 2,000 postings (2.4 against 2.0 ms).
#
# chunk_terms knows no embedding model: while a KB is re-embedded for a new model, a chunk of
# the old one can take a BM25 slot, and VECTOR_SQL's join (or the in-memory copy) finds no row
# for it: it is dropped (a shorter list, never a wrong chunk).
_BM25 = """
terms AS MATERIALIZED (
    SELECT DISTINCT l.kb_ids, lexeme AS term
    FROM {languages} AS l(language, kb_ids),
         unnest(tsvector_to_array(to_tsvector(l.language::regconfig, {question}))) AS lexeme
    WHERE {gate}
), postings AS MATERIALIZED (
    -- One index probe per lexeme. OFFSET 0 keeps the subquery from being flattened into a
    -- join that an estimate of the KB filter (unknown here: the KBs come from the statement
    -- itself) can turn into a scan of all of the agent's postings (measured on squad-dev's
    -- one KB: 44,800 postings read for 252, 12 ms instead of 0.6).
    SELECT p.chunk_id, t.term, p.tf::float8 AS tf, p.dl::float8 AS dl
    FROM terms t CROSS JOIN LATERAL (
        SELECT chunk_id, tf, dl FROM chunk_terms
        WHERE kb_id = ANY(t.kb_ids) AND term = t.term
        OFFSET 0
    ) p
), idf AS MATERIALIZED (
    SELECT term, ln(1 + (greatest({total}::float8 - count(*), 0) + 0.5) / (count(*) + 0.5::float8)) AS w
    FROM postings GROUP BY term
), bm25 AS (
    SELECT p.chunk_id AS id,
           sum(i.w * p.tf * 2.2 / (p.tf + 1.2 * (0.25 + 0.75 * p.dl / m.avgdl))) AS rank
    FROM postings p
    JOIN idf i ON i.term = p.term,
    (SELECT greatest(avg(dl), 1) AS avgdl FROM postings) m
    WHERE {visible}
    GROUP BY p.chunk_id
    ORDER BY rank DESC, p.chunk_id
    LIMIT {limit}
)"""

# One round trip before the vector search: the agent's KBs (id, content version, language,
# size), its prompt variant (the request's $4, else the agent's setting, else the default $5),
# the documents hidden from the call (outside their validity window, or refused by the
# agent's filters and the call's clauses $9; $10 the call's attribute keys, to find those no
# document has), the cached answer whose key binds agent, question, prompts, model, variant,
# the hidden documents and the content version of every KB the agent reads (any change to
# those KBs changes the key), and BM25's
# candidates for the question $6 (at most $7), while the question's embedding is on its way.
# BM25 runs only when it will be used: the agent has chunks, and no cached answer is served
# ($8 true asks for it regardless: debug mode ignores the cache). Two statements cost a round
# trip more, and the embedding request's client work, which runs while PostgreSQL works, then
# delayed the second one (measured: docs/BENCHMARKS.md, seventh session).
# With $11 true (the service holds the agent's KBs in memory, with their postings) BM25 is
# left to the copies and the statement returns the question's lexemes in each language of
# the KBs instead (``question_terms``): PostgreSQL still stems the question, so both rankings
# read the same lexemes, and the postings' aggregation (about 1.7 ms of this statement at
# 1,000 chunks a KB) is the process's (docs/BENCHMARKS.md, sixteenth session).
AGENT_CONTEXT_SQL = (
    """
WITH kbs AS (
    SELECT kb.id, kb.content_version, coalesce(kb.updated_at, kb.created_at) AS changed, kb.language,
           kb.chunk_count
    FROM agent_assignments a JOIN knowledge_bases kb ON kb.id = a.kb_id
    WHERE a.org_id = $1 AND a.agent_id = $2 AND kb.org_id = $1
), agent AS (
    -- One read of the agent's row: its variant, and whether it is known here at all.
    -- Its escalation policy too (migration 0011): applied to every reply, cached ones included.
    SELECT coalesce($4, a.prompt_variant, $5) AS variant, a.agent_id IS NOT NULL AS known,
           coalesce(a.escalation_on_not_found, 'say') AS on_not_found,
           coalesce(a.escalation_topics, '{}') AS topics,
           -- Whether answers name their source (migration 0017): part of the cache key when
           -- spoken, so the keys of agents that leave it off are what they were.
           coalesce(a.attribution, 'off') AS attribution,
           -- Its fixed filters (migration 0020), and the call's $9 joined to them.
           coalesce(a.filter_clauses, '[]') AS agent_clauses,
           $9::jsonb || coalesce(a.filter_clauses, '[]') AS clauses
    FROM (SELECT) AS one LEFT JOIN agents a ON a.org_id = $1 AND a.agent_id = $2
), hidden AS MATERIALIZED (
    -- The agent's documents no search may return (migration 0020): outside their validity
    -- window now (read through the partial index of windowed documents), or failing a
    -- clause of the filters (read only when there are clauses).
    SELECT coalesce(array_agg(id ORDER BY id), '{}') AS ids FROM (
        SELECT d.id FROM documents d
        WHERE d.kb_id IN (SELECT id FROM kbs) AND d.org_id = $1
          AND (d.effective_from IS NOT NULL OR d.expires_at IS NOT NULL)
          AND NOT (coalesce(d.effective_from <= now(), true) AND coalesce(d.expires_at > now(), true))
        UNION
        SELECT d.id FROM documents d
        WHERE (SELECT jsonb_array_length(clauses) > 0 FROM agent)
          AND d.kb_id IN (SELECT id FROM kbs) AND d.org_id = $1
          AND NOT documents_match(d.tags, d.attributes, (SELECT clauses FROM agent))
    ) h
), cache_key AS (
    -- The hidden documents are part of the key: an answer is never served once a document
    -- it rests on expires, nor to a call whose filters hide other documents.
    SELECT sha256(convert_to(
        $3 || '|' || (SELECT variant FROM agent) || '|'
        || (SELECT CASE WHEN attribution = 'spoken' THEN 'spoken|' ELSE '' END FROM agent)
        || coalesce(string_agg(id::text || ':' || content_version, ',' ORDER BY id), '')
        || '|' || (SELECT ids::text FROM hidden), 'UTF8'
    )) AS k FROM kbs
), ctx AS MATERIALIZED (
    SELECT
        coalesce((SELECT array_agg(id ORDER BY id) FROM kbs), '{}') AS kb_ids,
        coalesce((SELECT array_agg(content_version ORDER BY id) FROM kbs), '{}') AS kb_versions,
        coalesce((SELECT array_agg(changed ORDER BY id) FROM kbs), '{}') AS kb_changed,
        coalesce((SELECT sum(chunk_count) FROM kbs), 0)::bigint AS chunk_total,
        (SELECT k FROM cache_key) AS cache_key,
        (SELECT variant FROM agent) AS variant,
        (SELECT known FROM agent) AS known,
        (SELECT on_not_found FROM agent) AS on_not_found,
        (SELECT topics FROM agent) AS topics,
        (SELECT attribution FROM agent) AS attribution,
        (SELECT agent_clauses FROM agent) AS agent_clauses,
        (SELECT ids FROM hidden) AS hidden_documents,
        -- Which of the call's attribute keys ($10) some document of the agent's KBs has.
        (SELECT array_agg(DISTINCT k) FROM documents d, jsonb_object_keys(d.attributes) AS k
          WHERE cardinality($10::text[]) > 0 AND d.kb_id IN (SELECT id FROM kbs) AND d.org_id = $1
            AND k = ANY($10::text[])) AS known_keys,
        (SELECT response FROM answer_cache c, cache_key
          WHERE c.cache_key = cache_key.k AND c.org_id = $1 AND c.expires_at > now()) AS cached
),"""
    + _BM25.format(
        languages="(SELECT coalesce(language, 'english'), array_agg(id) FROM kbs GROUP BY 1)",
        question="$6::text",
        gate="(SELECT chunk_total > 0 AND (cached IS NULL OR $8::boolean) FROM ctx) AND NOT $11::boolean",
        total="(SELECT chunk_total FROM ctx)",
        limit="$7",
        visible="p.chunk_id NOT IN (SELECT c.id FROM chunks c"
        " WHERE c.document_id = ANY((SELECT ids FROM hidden)::uuid[]))",
    )
    + """
SELECT ctx.*,
       (SELECT array_agg(id ORDER BY rank DESC, id) FROM bm25) AS text_ids,
       (SELECT array_agg(rank ORDER BY rank DESC, id) FROM bm25) AS text_ranks,
       (SELECT array_agg(coalesce(language, 'english') ORDER BY id) FROM kbs) AS kb_languages,
       CASE WHEN $11::boolean AND chunk_total > 0 AND (cached IS NULL OR $8::boolean) THEN
           (SELECT jsonb_object_agg(l, tsvector_to_array(to_tsvector(l::regconfig, $6::text)))
            FROM (SELECT DISTINCT coalesce(language, 'english') AS l FROM kbs) AS languages)
       END AS question_terms
FROM ctx
"""
)

# BM25 alone, for the KBs $1 whose text-search languages are $2 (one each), the question $3,
# $4 chunks in all, at most $5 rows, none of the documents $6: AGENT_CONTEXT_SQL's ranking, for
# a call that expected to rank in memory and found a KB's copy gone or stale (retrieval.py).
TEXT_SQL = (
    "WITH"
    + _BM25.format(
        languages="(SELECT l, array_agg(k) FROM unnest($1::uuid[], $2::text[]) AS u(k, l) GROUP BY l)",
        question="$3::text",
        gate="true",
        total="$4",
        limit="$5",
        visible="p.chunk_id NOT IN (SELECT c.id FROM chunks c WHERE c.document_id = ANY($6::uuid[]))",
    )
    + "\nSELECT id, rank FROM bm25 ORDER BY rank DESC, id\n"
)

# The second statement, unless the agent's KBs are held in memory (then the copies are
# searched in the process; app/query/kb_vectors.py): the nearest chunks by cosine distance
# ({vector_candidates}, one of the VECTOR_* fragments below; at most the ``candidates``
# setting), ranked by distance, and BM25's ids $5 in their order, to be fused in Python
# (retrieval.fuse: one fusion for every plan). $3 selects chunks of the current embedding
# model; $4 is the same key, or a key that matches nothing when the question could not be
# embedded, which leaves BM25 alone.
#
# Only the chunks that can reach the fused top_k ({needed}: NEEDED_TOP) are read in full
# (text, title: a join per chunk); the other vector candidates come as their rank alone, and
# BM25's other ids not at all (fuse ranks them from $5). Reading every row in full cost
# PostgreSQL 0.3 ms a call (up to 60 rows of text; docs/BENCHMARKS.md). NEEDED_ALL reads all
# of them (debug mode and the playground list every candidate).
#
# The sizes are the process's settings, written into the statement (Retriever formats them;
# each is an int) rather than passed: PostgreSQL then estimates a custom plan and the generic
# one alike, and keeps the generic plan after five runs. Passed as parameters, the limits made
# the generic plan look costlier in 3 of 5 sets of questions, and the statement was planned
# again on every call (0.3 ms; docs/BENCHMARKS.md, seventh session).
VECTOR_SQL = """
WITH vec AS (
    {vector_candidates}
), vec_ranked AS (
    SELECT id, dist, row_number() OVER (ORDER BY dist, id) AS r FROM vec
), text_ranked AS (
    SELECT id, r FROM unnest($5::bigint[]) WITH ORDINALITY AS t(id, r)
), listed AS (
    SELECT coalesce(v.id, t.id) AS id, v.r AS vector_rank, v.dist, {needed} AS needed
    FROM vec_ranked v FULL JOIN text_ranked t ON t.id = v.id
)
SELECT l.id, l.vector_rank, 1 - l.dist AS similarity,
       c.text, c.section, c.page, c.document_id, d.title
FROM listed l
JOIN chunks c ON c.id = l.id AND c.embedding_model = $3
JOIN documents d ON d.id = c.document_id
WHERE l.needed
UNION ALL
SELECT l.id, l.vector_rank, 1 - l.dist, NULL, NULL, NULL, NULL, NULL
FROM listed l
WHERE NOT l.needed AND l.vector_rank IS NOT NULL
"""
# A chunk outside both lists' first top_k ranks, and in only one of them, cannot enter the
# fused top_k: the first top_k of its list each score more (or, at a weight of 0, tie and
# come first by vector rank). One in both lists may outscore them, whatever its ranks.
# (IS TRUE: a rank the other list lacks is NULL, and NULL must read as "not needed".)
NEEDED_TOP = "(v.r <= {top_k} OR t.r <= {top_k} OR (v.id IS NOT NULL AND t.id IS NOT NULL)) IS TRUE"
NEEDED_ALL = "true"
# With the best-sentence term (Retriever.rescore) any vector candidate may move up to the top
# ranks, and is read in full (its text names its sentences); BM25's other ids still cannot.
NEEDED_RESCORED = "(v.id IS NOT NULL OR t.r <= {top_k}) IS TRUE"

# Exact search: the KB b-tree yields the agent's rows and every one is compared. The
# plain column expression cannot use the HNSW expression index, which keeps the planner
# from choosing a filtered ANN scan that may return too few rows (FIELD-NOTES), custom plan
# or generic. {kb_filter} is one of the two below. The question's vector is an InitPlan: in
# a generic plan ``$1::float4[]::vector`` would otherwise be converted again for every row
# (measured: 1.5 -> 4.3 ms over 1,000 chunks).
VECTOR_EXACT = """
    SELECT c.id, c.embedding <=> (SELECT $1::float4[]::vector) AS dist
    FROM chunks c
    WHERE {kb_filter} AND c.embedding_model = $4{hidden_filter}
    ORDER BY dist, c.id
    LIMIT {candidates}
"""
# Most agents read one KB. Its equality is estimated at one KB's share of the chunks, as a
# custom plan sees it, which lets PostgreSQL keep the generic plan (see VECTOR_SQL). For a
# list, a generic plan assumes ten KBs, and each call is planned for its own.
ONE_KB = "c.kb_id = ($2::uuid[])[1]"
ANY_KB = "c.kb_id = ANY($2::uuid[])"

# Approximate search through the HNSW expression index for the dimension in use. With
# pgvector >= 0.8 the caller enables iterative index scans so the KB filter cannot starve
# the result; below 0.8 it raises ef_search and over-fetches (documented as approximate).
VECTOR_HNSW = """
    SELECT c.id, c.embedding::vector({dim}) <=> $1::float4[]::vector({dim}) AS dist
    FROM chunks c
    WHERE c.embedding_dim = {dim} AND c.kb_id = ANY($2::uuid[]) AND c.embedding_model = $4{hidden_filter}
    ORDER BY c.embedding::vector({dim}) <=> $1::float4[]::vector({dim})
    LIMIT {candidates}
"""

# With documents hidden from the call ($6, AGENT_CONTEXT_SQL's list): a hashed anti-join,
# one probe per chunk however many documents are hidden.
HIDDEN_FILTER = "\n      AND c.document_id NOT IN (SELECT unnest($6::uuid[]))"

PGVECTOR_VERSION_SQL = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"

HNSW_INDEX_SQL = """
CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_chunks_hnsw_{dim} ON chunks
USING hnsw ((embedding::vector({dim})) vector_cosine_ops) WHERE embedding_dim = {dim}
"""

# After the response is sent, one round trip: the query log row and, when the answer may be
# cached ($16 not null), the answer cache entry. $19 marks evaluation traffic (vk eval, vk
# replay), which the knowledge gaps leave out; $20 and $21 are the reply's action and
# transfer reason (escalation); $22 and $23 the standalone question the call was searched
# and answered with (null when it is the caller's own) and how it was made (conversation.py);
# $24 the chunk ids the answer was read from (used_sources); $25 to $27 the question, similarity
# and query id of the paraphrase whose answer was reused (semantic_cache.py), else null; $28
# the filters applied (migration 0020).
FINISH_SQL = """
WITH cache AS (
    INSERT INTO answer_cache (cache_key, org_id, agent_id, response, expires_at)
    SELECT $16, $2, $3, $17::jsonb, now() + make_interval(secs => $18)
    WHERE $16::bytea IS NOT NULL
    ON CONFLICT (cache_key) DO UPDATE SET response = excluded.response, expires_at = excluded.expires_at,
        created_at = now()
)
INSERT INTO query_log (id, org_id, agent_id, query, normalized_query, status, confidence, chunks, answer,
                       prompt_variant, prompt_version, model, timings, cached, degraded, evaluation,
                       action, transfer_reason, standalone_question, standalone_method, used_sources,
                       semantic_question, semantic_similarity, semantic_query_id, filters)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, $12, $13::jsonb, $14, $15, $19, $20, $21,
        $22, $23, $24::bigint[], $25, $26, $27, $28::jsonb)
"""

# Expired answers are never served (AGENT_CONTEXT_SQL checks expires_at), but every change
# to a KB leaves its agents' old keys behind: without this the table only grows.
PRUNE_ANSWER_CACHE_SQL = "DELETE FROM answer_cache WHERE expires_at < now()"

# One KB's chunks of one embedding model for the in-memory exact search (kb_vectors.py), with
# the KB's content version and change time read in the same statement, hence the same
# snapshot: the copy is exactly the chunks of that version (a trigger bumps the version in
# the transaction of every chunk change: migration 0009). vector_send is pgvector's binary
# form (int16 dim, int16 unused, float4s big-endian): a 1,000-chunk KB arrives as bytes numpy
# reads in one call, where float4[] would be half a million Python floats. A KB without
# chunks of the model still answers its version.
KB_VECTORS_SQL = """
SELECT kb.content_version AS version, coalesce(kb.updated_at, kb.created_at) AS changed,
       coalesce(kb.language, 'english') AS language, c.id,
       vector_send(c.embedding) AS v, c.document_id, d.title, c.section, c.page, c.text
FROM knowledge_bases kb
LEFT JOIN (chunks c JOIN documents d ON d.id = c.document_id)
       ON c.kb_id = kb.id AND c.embedding_model = $3
WHERE kb.id = $1 AND kb.org_id = $2
ORDER BY c.id
"""

# The KB's BM25 postings, read in KB_VECTORS_SQL's snapshot (one repeatable-read transaction)
# so that they are its version's: BM25 over the copy (retrieval.py) ranks as AGENT_CONTEXT_SQL
# does. Every chunk of the KB, of any embedding model, as chunk_terms holds them (the SQL
# ranking counts them all). One row a term, its postings packed big-endian in chunk id order:
# 2,230 rows for a 1,000-chunk KB's 78,854 postings arrive in 18 ms and are read by numpy in
# 2, where a row a posting took 80-99 ms of asyncpg's decoding on the event loop.
KB_POSTINGS_SQL = """
SELECT term, count(*) AS n,
       string_agg(int8send(chunk_id), ''::bytea ORDER BY chunk_id) AS ids,
       string_agg(int4send(tf), ''::bytea ORDER BY chunk_id) AS tfs,
       string_agg(int4send(dl), ''::bytea ORDER BY chunk_id) AS dls
FROM chunk_terms WHERE kb_id = $1 GROUP BY term
"""
# The document of each chunk the postings name, by which a call hides it (by id, as the SQL's
# ranking finds it, whatever KB the chunk's row says).
KB_CHUNK_DOCUMENTS_SQL = """
SELECT c.id, c.document_id FROM chunks c WHERE c.id IN (SELECT chunk_id FROM chunk_terms WHERE kb_id = $1)
"""


# The offline answerer's sentence vectors, stored at ingestion (app/query/sentences.py).
SENTENCE_VECTORS_SQL = """
SELECT text_hash, vector_send(embedding) AS v FROM embedding_cache
WHERE model_key = $1 AND text_hash = ANY($2::bytea[])
"""

# Sentences' own vectors ($1) and vectors of sentences read inside their chunks ($3), at once.
ANSWER_VECTORS_SQL = """
SELECT text_hash, vector_send(embedding) AS v, model_key = $1 AS own FROM embedding_cache
WHERE (model_key = $1 AND text_hash = ANY($2::bytea[]))
   OR (model_key = $3 AND text_hash = ANY($4::bytea[]))
"""
