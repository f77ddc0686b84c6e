"""Service settings: one pydantic-settings class, read once.

Every knob has a default and an environment variable. Nested groups use a double
underscore, e.g. ``QUERY__DEADLINE_S=2.0``; a few top-level names (``DATABASE_URL``,
``OPENAI_API_KEY``) keep their conventional spelling.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.ingestion.fetch import IntranetAccess, parse_allowed_host, parse_allowed_network

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Section(BaseModel):
    """A group of settings. No number may be infinite or NaN: "inf" reads as a float, and a
    lease of inf seconds made every claim fail in PostgreSQL, with the service still ready."""

    model_config = ConfigDict(allow_inf_nan=False)


class DatabaseSettings(Section):
    # A call holds up to two connections for a moment (its own, and the previous call's log
    # write after its response), and connections past pool_size are closed when returned: a
    # pool smaller than the connections in use pays a new PostgreSQL connection per overflow
    # checkout (16 callers with 10: +1 ms of PostgreSQL CPU per call, -10 % throughput).
    pool_size: int = Field(20, ge=1, le=200, description="Connections kept open per process.")
    max_overflow: int = Field(10, ge=0, le=200, description="Extra connections allowed under burst.")
    pool_timeout_s: float = Field(2.0, gt=0, description="Wait for a free connection before 503.")
    connect_timeout_s: float = Field(3.0, gt=0, description="TCP/auth timeout for a new connection.")
    statement_timeout_ms: int = Field(
        15_000,
        ge=100,
        le=3_600_000,
        description="Server-side cap on any statement (the client gives up 2 s later: a server that hangs "
        "cannot end one itself).",
    )
    embedded_dir: Path = Field(
        PROJECT_ROOT / ".data" / "postgres",
        description="Data folder of the embedded PostgreSQL used when DATABASE_URL is unset.",
    )


class LimitSettings(Section):
    query_per_minute: int = Field(
        1200,
        ge=0,
        description="Voice-runtime calls (query_knowledge, its stream, the tool declaration, anything with "
        "a query key) per organisation per minute (0 = no limit).",
    )
    manage_per_minute: int = Field(
        300, ge=0, description="Other calls with an admin key per organisation per minute (0 = no limit)."
    )
    query_in_flight: int = Field(
        64,
        ge=0,
        description="Voice-runtime calls one organisation may have in progress at once in each server "
        "process (questions; the tool declaration is not counted); more get 429 at once, so one "
        "organisation's burst is bounded before the search and the model (0 = no limit).",
    )
    documents_per_kb: int = Field(10_000, ge=1, description="Most documents one knowledge base may hold.")
    org_storage_bytes: int = Field(
        2 * 1024**3, ge=1024, description="Most bytes of documents one organisation may store."
    )
    embedding_tokens_per_day: int = Field(
        20_000_000, ge=0, description="Embedding tokens per organisation per UTC day (0 = no limit)."
    )
    max_upload_bytes: int = Field(
        20 * 1024 * 1024, ge=1024, description="Largest document (upload or JSON body); 413 beyond."
    )
    bulk_max_files: int = Field(
        100,
        ge=1,
        le=1000,
        description="Most files in one bulk upload, and most ids plus paths in one bulk delete "
        "(a bulk upload's whole body is also held to max_upload_bytes).",
    )


class EmbeddingSettings(Section):
    provider: Literal["auto", "minilm", "lexical", "openai", "local"] = Field(
        "auto",
        description="auto = openai when OPENAI_API_KEY is set, else minilm: all-MiniLM-L6-v2 run "
        "offline by ONNX Runtime (semantic). lexical = hashed stemmed words (fast, matches words only); "
        "local = any sentence-transformers model (needs torch, not installed by default).",
    )
    openai_model: str = Field(
        "text-embedding-3-small", description="Embedding model for the openai provider."
    )
    openai_dimensions: int | None = Field(None, ge=64, le=2000, description="None = the model's native size.")
    lexical_dimensions: int = Field(512, ge=64, le=2000, description="Size of the offline lexical vectors.")
    local_model: str = Field("all-MiniLM-L6-v2", description="sentence-transformers model (optional extra).")
    minilm_precision: Literal["int8", "fp32"] = Field(
        "int8",
        description="minilm: int8 (2-5 ms a question, cosine 0.998 to the reference on average) or "
        "fp32 (the reference's vectors, 1.7-2.5x slower). Changing it re-indexes the KBs.",
    )
    model_cache_dir: Path | None = Field(
        PROJECT_ROOT / ".data" / "models",
        description="minilm: where the model built at first start (about 4 s) is kept; "
        "None = rebuilt at each start.",
    )
    max_concurrency: int = Field(4, ge=1, le=64, description="Embedding requests in flight per process.")
    query_timeout_s: float = Field(0.8, gt=0, description="Budget for embedding a question on the hot path.")


class IngestionSettings(Section):
    workers: int = Field(
        2, ge=0, le=64, description="Documents ingested at once by the workers `vk serve` starts (0 = none)."
    )
    isolation: Literal["process", "inline"] = Field(
        "process",
        description="Where `vk serve` runs its ingestion workers: process = one `vk worker` process "
        "beside the service, at lower CPU priority, restarted if it dies, so parsing, chunking and "
        "embedding never hold the event loop that answers calls; inline = inside the service "
        "process (one process, a slower call whenever a large document ingests).",
    )
    nice: int = Field(
        10, ge=0, le=19, description="How much lower the worker process's CPU priority is (nice increment)."
    )
    poll_interval_s: float = Field(
        1.0, gt=0, le=3600, description="How often idle workers look for queued work."
    )
    lease_s: float = Field(
        120.0, ge=5, le=86_400, description="A job whose worker stopped renewing is retaken after this."
    )
    max_attempts: int = Field(3, ge=1, le=20, description="Tries per document before it fails.")
    chunk_tokens: int = Field(500, ge=64, le=2000, description="Default chunk size for new KBs (tokens).")
    chunk_overlap_tokens: int = Field(60, ge=0, le=1000, description="Default chunk overlap for new KBs.")
    parse_timeout_s: float = Field(
        60.0, gt=0, description="Wall-clock bound on parsing one PDF or Office file."
    )
    parse_page_timeout_s: float = Field(
        10.0, gt=0, description="A PDF page that takes longer is skipped (counted in pages_skipped)."
    )
    parse_memory_mb: int = Field(
        1024, ge=128, description="Address-space cap of the PDF and Office parser process."
    )
    parse_concurrency: int = Field(
        2, ge=1, le=32, description="PDF and Office parser processes at once per process."
    )
    fetch_timeout_s: float = Field(15.0, gt=0, description="Total deadline for fetching one URL.")
    fetch_max_bytes: int = Field(10_000_000, ge=1024, description="Largest fetched page.")
    url_resync_s: int = Field(
        86_400, ge=0, description="Default re-sync interval for URL documents (0 = never)."
    )
    # NoDecode: the environment gives a comma-separated list, not JSON.
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Comma-separated internal hosts URL sources may reach, each optionally with "
        "a port (wiki.corp, docs.corp:8443): they may resolve to private addresses, never to "
        "loopback or link-local/cloud metadata ones. Empty = none (only public hosts, ports 80/443).",
    )
    allowed_networks: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Comma-separated CIDR networks (10.20.0.0/16) whose addresses URL sources may "
        "reach. Loopback and link-local/cloud metadata addresses open only to a network inside "
        "their range (127.0.0.0/8, 169.254.169.254/32), not to a broader one. Empty = none.",
    )

    @field_validator("allowed_hosts", "allowed_networks", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(entry.strip() for entry in value.split(",") if entry.strip())
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _check_hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            parse_allowed_host(entry)
        return value

    @field_validator("allowed_networks")
    @classmethod
    def _check_networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            parse_allowed_network(entry)
        return value

    @property
    def intranet(self) -> IntranetAccess:
        """What the fetcher may reach beyond the public web, as the two settings above say."""
        return IntranetAccess.parse(self.allowed_hosts, self.allowed_networks)


class CrawlSettings(Section):
    delay_s: float = Field(
        1.0,
        ge=0,
        le=60,
        description="Pause between two requests of a crawl to the same host (a robots.txt "
        "Crawl-delay, up to 60 s, lengthens it).",
    )
    max_pages_default: int = Field(200, ge=1, description="Pages a crawl keeps when it names no max_pages.")
    max_pages_limit: int = Field(
        2000, ge=1, description="Hard upper cap on a crawl's max_pages; larger requests are refused (422)."
    )
    max_sitemaps: int = Field(
        20, ge=0, le=1000, description="Sitemap files (sitemap indexes included) read per crawl run."
    )
    workers: int = Field(1, ge=0, le=16, description="Crawls run at once by each worker process (0 = none).")
    poll_interval_s: float = Field(2.0, gt=0, description="How often an idle crawl loop looks for work.")


class WebhookSettings(Section):
    # Deliveries run in the ingestion worker process (`vk worker`, or the service itself with
    # INGESTION__ISOLATION=inline). Their URLs pass the same checks as URL documents, at
    # registration and before every delivery: INGESTION__ALLOWED_HOSTS/NETWORKS open intranet hosts.
    concurrency: int = Field(
        4, ge=0, le=64, description="Deliveries in flight at once per worker process (0 = none here)."
    )
    timeout_s: float = Field(10.0, gt=0, le=60, description="Deadline for one delivery attempt.")
    max_attempts: int = Field(8, ge=1, le=30, description="Attempts per delivery before it is marked failed.")
    backoff_base_s: float = Field(
        15.0, gt=0, description="Delay before the second attempt; each further one doubles it."
    )
    backoff_max_s: float = Field(
        3600.0, gt=0, le=7 * 86_400, description="Longest delay between two attempts."
    )
    lease_s: float = Field(
        60.0, ge=5, le=86_400, description="An attempt whose worker vanished is retried after this."
    )
    poll_interval_s: float = Field(
        2.0, gt=0, description="How often an idle dispatcher looks for due deliveries."
    )
    retention_days: int = Field(
        30, ge=1, description="Events and their delivery log are deleted after this many days."
    )

    @model_validator(mode="after")
    def _lease_outlasts_an_attempt(self) -> WebhookSettings:
        # A lease that ran out while its attempt was still waiting on the endpoint would hand
        # the delivery to another worker: the receiver would get it twice.
        if self.lease_s <= self.timeout_s:
            raise ValueError(
                f"lease_s ({self.lease_s:g}) must be longer than timeout_s ({self.timeout_s:g}), "
                "or a slow attempt is taken over and sent twice"
            )
        return self


class QuerySettings(Section):
    deadline_s: float = Field(2.5, gt=0, description="Whole-request budget: embed + search + LLM.")
    top_k: int = Field(6, ge=1, le=50, description="Chunks handed to the answering model.")
    candidates: int = Field(30, ge=5, le=500, description="Candidates per retriever before fusion.")
    rrf_k: int | None = Field(
        None,
        ge=1,
        description="Reciprocal rank fusion constant. Default by embedder, as measured "
        "(docs/BENCHMARKS.md): minilm 4, the others 60.",
    )
    vector_weight: float | None = Field(
        None,
        ge=0,
        le=4,
        description="Weight of the vector ranking in the fusion (BM25 weighs 1). Default by "
        "embedder, as measured (docs/BENCHMARKS.md): lexical 0, local 0.5, minilm 1.5, openai 1.",
    )
    sentence_weight: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Share of a vector candidate's score taken from its closest sentence (the "
        "rest from the chunk's own vector), where sentence vectors are stored (the offline "
        "embedders). Default by embedder, as measured (docs/BENCHMARKS.md): minilm 0.5, the "
        "others 0 (off).",
    )
    min_confidence: float = Field(
        0.2,
        ge=0,
        le=1,
        description="Lexical and OpenAI embedders (and minilm when a question's embedding failed): "
        "below this retrieval confidence the reply is not_found and the LLM is not called.",
    )
    min_answer_confidence: float = Field(
        0.39,
        ge=0,
        le=1,
        description="Offline default (minilm): below this calibrated confidence, the chance that the "
        "best sentence answers the question, the reply is not_found (docs/CONFIDENCE.md).",
    )
    exact_search_max_chunks: int = Field(
        20_000, ge=0, description="Agents whose KBs hold at most this many chunks get exact vector search."
    )
    min_support: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Lexical embedder's answerer: share of the question its sentences must cover.",
    )
    max_answer_words: int = Field(
        60,
        ge=5,
        le=400,
        description="Longest spoken answer, in words. The answering model is asked to keep within "
        "it, the extractive answerer picks sentences within it, and a longer answer is cut after "
        "its last whole sentence that fits (at the limit itself if that keeps less than half).",
    )
    answer_cache_ttl_s: int = Field(3600, ge=0, description="Lifetime of cached answers (0 = off).")
    semantic_cache_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Semantic answer cache: a question whose embedding is at least this similar "
        "(cosine) to a recent answered question of the same agent, KB versions and settings, and "
        "names the same numbers and particulars, gets its answer. Unset = the embedder's calibrated "
        "default (minilm 0.85; the others off: not calibrated); 0 = off. Per process "
        '(docs/CONFIDENCE.md, "Semantic answer cache").',
    )
    llm_model: str = Field("gpt-4o-mini", description="Answering model unless the prompt names one.")
    llm_max_tokens: int = Field(
        200, ge=16, le=4000, description="Answer token cap unless the prompt sets one."
    )
    prompt_variant: str = Field("default", description="Prompt variant used when an agent has none set.")
    vector_cache_mb: int = Field(
        512,
        ge=0,
        description="Per process: memory for copies of small KBs' vectors and text, searched "
        "exactly without a database round trip (0 = off: every search in PostgreSQL).",
    )
    history_max_turns: int = Field(
        6,
        ge=1,
        le=20,
        description="Most conversation turns of a query_knowledge call's `history` read: the last "
        "ones that say something (up to 20 are accepted).",
    )
    history_max_turn_chars: int = Field(
        1000, ge=50, le=2000, description="Most characters of a `history` turn read: its last ones."
    )
    history_max_total_chars: int = Field(
        6000,
        ge=100,
        le=40000,
        description="Most characters of all `history` turns read together (the latest turns that fit); "
        "it binds only when below history_max_turns x history_max_turn_chars.",
    )
    rewrite_timeout_s: float = Field(
        0.6,
        gt=0,
        le=5,
        description="With an answering model: budget for rewriting a follow-up question into a "
        "standalone one (at most a third of deadline_s); past it the offline completion is used.",
    )
    holding_after_s: float = Field(
        0.8,
        ge=0,
        le=10,
        description="Streaming calls (query_knowledge/stream) with an answering model: when no sentence "
        "is ready this long after the call began, a `holding` event carries the phrase of "
        "reply.holding.md for the voice to say meanwhile.",
    )


class ConsoleSettings(Section):
    session_idle_s: int = Field(
        1800, ge=60, description="A console session unused this long is signed out (seconds)."
    )
    session_max_s: int = Field(
        43_200, ge=300, description="A console session ends this long after sign-in, used or not (seconds)."
    )
    secure_cookie: Literal["auto", "always"] = Field(
        "auto",
        description="auto = the session cookie is marked Secure when the request came over https "
        "(as the server saw it, or as X-Forwarded-Proto says when trust_forwarded_proto is set); "
        "always = marked Secure whatever the request (any deployment behind TLS).",
    )
    trust_forwarded_proto: bool = Field(
        False,
        description="Believe the X-Forwarded-Proto header (set it only behind a proxy that sets "
        "the header itself, replacing what a client sent).",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_nested_delimiter="__", env_file=".env", extra="ignore", populate_by_name=True, allow_inf_nan=False
    )

    database_url: str | None = Field(
        None,
        validation_alias="DATABASE_URL",
        description="postgresql://... ; unset = embedded PostgreSQL (pgserver) under db.embedded_dir.",
    )
    openai_api_key: SecretStr | None = Field(
        None,
        validation_alias="OPENAI_API_KEY",
        description="Set = OpenAI embeddings and answers; unset = offline.",
    )
    openai_base_url: str | None = Field(
        None, validation_alias="OPENAI_BASE_URL", description="Any OpenAI-compatible server."
    )
    host: str = Field("127.0.0.1", description="Bind address of `vk serve`.")
    port: int = Field(8000, ge=1, le=65535, description="Port of `vk serve`.")
    keep_alive_s: float = Field(
        75.0,
        gt=0,
        le=3600,
        description="How long `vk serve` keeps an idle client connection open. Longer than the "
        "idle timeout of the proxy in front (60 s on many load balancers), or the proxy may send a "
        "request on a connection the service is closing (a reset, a 502).",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Log level.")
    prompts_dir: Path = Field(PROJECT_ROOT / "prompts", description="Folder of prompt files.")
    debug: bool = Field(
        False, description="Litestar debug mode (tracebacks in responses): never in production."
    )

    db: DatabaseSettings = DatabaseSettings()
    limits: LimitSettings = LimitSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    ingestion: IngestionSettings = IngestionSettings()
    crawl: CrawlSettings = CrawlSettings()
    query: QuerySettings = QuerySettings()
    webhooks: WebhookSettings = WebhookSettings()
    console: ConsoleSettings = ConsoleSettings()

    @property
    def embedding_provider(self) -> Literal["minilm", "lexical", "openai", "local"]:
        if self.embedding.provider != "auto":
            return self.embedding.provider
        return "openai" if self.openai_api_key else "minilm"

    @property
    def answerer(self) -> Literal["openai", "extractive"]:
        return "openai" if self.openai_api_key else "extractive"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
