"""query_knowledge: the voice model's tool. Written for speed on purpose: raw asyncpg,
at most two round trips to the database, nothing recomputed that can be computed once, and a
deadline over the whole request so a caller never hears silence for long.

A call is a ``Call`` taken through three stages, each returning its value to ``_respond``:

1. ``_context``: the agent's KBs, prompt variant, policies, hidden documents, the answer
   cache and BM25's hits, in one statement (while the question's embedding is on its way);
2. retrieval: ``_retrieve`` (the semantic answer cache, then the Retriever) and ``_judge``
   (the sentence that answers, and the confidence);
3. ``_compose``: the answer, read from the passages or written by the answering model.

``_respond`` then names the source (attribution) and applies the agent's escalation policy;
``_finish`` logs the call and caches its answer after the response is sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
import unicodedata
import uuid
from array import array
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncEngine

from app.agents.escalation import matched_topic
from app.agents.service import AGENT_NOT_FOUND
from app.answering.attribution import lower_first, speakable_title, strip_citations, used_passages
from app.answering.extractive import (
    ExtractiveAnswer,
    Passage,
    Semantics,
    asking_part,
    extractive_answer,
)
from app.answering.grounding import declines, echoes, is_not_speech, numbers_not_in
from app.answering.injection import looks_like_instructions
from app.answering.llm import ChatAnswerer, LLMError, LLMResult
from app.answering.speech import make_speakable
from app.config import QuerySettings
from app.db.engine import raw_connection
from app.embeddings.base import Embedder, EmbeddingError, embedder_family
from app.embeddings.lexical import lexical_terms, term_set
from app.errors import AppError, NotFound
from app.observability.metrics import PROVIDER_ERRORS, SEARCH_PLANS, TEXT_PLANS
from app.prompting import KnowledgeItem, PromptLibrary, PromptSet
from app.query import repository as sql
from app.query.confidence import calibrated_confidence
from app.query.conversation import Contextualiser, Standalone, Turn, usable_history
from app.query.filters import QueryFilters, applied, attribute_keys, require_known_keys, to_clauses
from app.query.kb_vectors import KBVectorCache, KBVectors
from app.query.retrieval import Candidate, Corpus, Retrieval, Retriever
from app.query.schemas import Action, QueryReply, Status
from app.query.semantic_cache import Match, SemanticAnswerCache, default_threshold, scope_of
from app.query.sentences import SentenceEncoder, SentenceVectors

if TYPE_CHECKING:
    from app.query.streaming import Speaker

log = logging.getLogger(__name__)

NOT_FOUND_MARK = "NOT_FOUND"
_SPACES = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s?!.,;:]+$")

# Cosine similarity ranges (irrelevant .. clearly relevant) per embedder family, used to
# put the top vector hit on a 0..1 scale before it enters the confidence.
_SIMILARITY_RANGE = {"lexical": (0.03, 0.40), "openai": (0.15, 0.60), "local": (0.10, 0.65)}
# Passages whose sentences the answerer reads.
_ANSWER_PASSAGES = 5
# A long turn's meaning, for retrieval and the answerer: this much of the whole turn, the
# rest from the part that asks (docs/EMBEDDINGS.md).
_WHOLE_TURN_WEIGHT = 0.4
# An answered reply's sources: the chunks the answer was read from, then the candidates the
# fusion scored at least this share of the best one's score (README, "sources"). With two
# lists of equal say, a chunk only one list ranks first scores half of one both rank first.
SOURCE_SCORE_FLOOR = 0.5
# What the runtime does with a reply that hands nobody over, by status.
_ACTIONS: dict[str, Action] = {
    "answered": "answer",
    "not_found": "say_not_found",
    "unavailable": "say_unavailable",
}
# Settings outside the answer cache's key (see QueryService.__init__).
_ASKING = re.compile(r"\b(?:who|whom|whose|where|when|why|what|which|how)\b", re.IGNORECASE)
_UNKEYED_SETTINGS = {"vector_cache_mb", "semantic_cache_threshold"}


def normalise_question(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return _TRAILING.sub("", _SPACES.sub(" ", text).strip())


@dataclass(slots=True)
class QueryOutcome:
    """What the endpoint returns, plus the work to do after the response is sent."""

    response: QueryReply
    finish: Callable[[], Awaitable[None]]


@dataclass(slots=True)
class _Trace:
    t0: float = field(default_factory=time.perf_counter)
    embed: float = 0.0
    search: float = 0.0
    llm: float = 0.0
    embed_wait: float = 0.0

    def timings(self) -> dict[str, float]:
        total = (time.perf_counter() - self.t0) * 1000
        return {
            "embed": round(self.embed, 2),
            "search": round(self.search, 2),
            "llm": round(self.llm, 2),
            "total": round(total, 2),
            # The embedding runs beside the SQL, so total - embed - llm would hide our own
            # time behind it: only the wait for it counts as the provider's.
            "own": round(max(0.0, total - self.embed_wait - self.llm), 2),
        }


@dataclass(slots=True)
class Call:
    """One call as asked, and its clock. Nothing is written into it along the way: each
    stage returns what it found."""

    org_id: uuid.UUID
    agent_id: uuid.UUID
    question: str  # the caller's own words
    history: Sequence[Turn] = ()
    variant: str | None = None
    filters: QueryFilters | None = None
    debug: bool = False
    speaker: Speaker | None = None
    # A playground call: never counted in the metrics, answered without the model if asked.
    dry: bool = False
    skip_model: bool = False
    trace: _Trace = field(default_factory=_Trace)
    query_id: uuid.UUID = field(default_factory=uuid.uuid4)


@dataclass(slots=True)
class Answer:
    """The knowledge's reply to a question, before the agent's escalation policy: what the
    answer cache stores (``stored``)."""

    answer: str
    status: Status
    confidence: float
    sources: list[dict[str, Any]]
    used_sources: list[int] = field(default_factory=list)
    cached: bool = False
    degraded: bool = False

    @classmethod
    def cached_from(cls, stored: dict[str, Any]) -> Answer:
        return cls(
            answer=stored["answer"],
            status=stored["status"],
            confidence=stored["confidence"],
            sources=stored["sources"],
            used_sources=stored.get("used_sources", []),
            cached=True,
            degraded=stored["degraded"],
        )

    def stored(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "status": self.status,
            "confidence": self.confidence,
            "sources": self.sources,
            "used_sources": self.used_sources,
            "degraded": self.degraded,
        }


@dataclass(frozen=True, slots=True)
class Context:
    """Stage 1: the agent's context row, read."""

    prompt: PromptSet
    cache_key: bytes | None
    on_not_found: str
    topics: list[str]
    attribution: str
    filters_applied: dict[str, Any] | None
    corpus: Corpus
    # The reply when nothing is to be searched (no chunks) or a cached answer is served.
    early: Answer | None
    # The semantic answer cache's scope (None with an early reply).
    scope: tuple[Any, ...] | None


@dataclass(frozen=True, slots=True)
class Found:
    """Stage 2: the chunks retrieved, the sentence that answers by meaning (offline), and
    how confident the service is of them."""

    retrieval: Retrieval
    vector: Sequence[float] | None
    evidence: ExtractiveAnswer | None
    confidence: float
    parts: dict[str, float]
    threshold: float

    @property
    def candidates(self) -> list[Candidate]:
        return self.retrieval.candidates


@dataclass(frozen=True, slots=True)
class Ask:
    """What the answering model is about to be sent."""

    messages: list[dict[str, str]]
    model: str


@dataclass(slots=True)
class Composed:
    """Stage 3: the answer, and what the answering model said of itself."""

    answer: Answer
    tokens: dict[str, int] | None = None
    llm_error: str | None = None


@dataclass(frozen=True, slots=True)
class Made:
    """A reply and what its making leaves for ``_finish`` and the playground."""

    reply: QueryReply
    knowledge_reply: dict[str, Any]
    prompt: PromptSet
    standalone: Standalone
    context: Context | None
    retrieval: Retrieval | None
    found: Found | None
    ask: Ask | None
    match: Match | None


@dataclass(frozen=True, slots=True)
class DryRunResult:
    """A query_knowledge reply as it would be given (with its debug details), plus what the
    playground shows beside it; nothing of it was logged or cached."""

    response: QueryReply
    variant: str
    prompt_version: str
    # Every chunk either list found, in fused order (at most 2 x ``candidates``).
    candidates: list[Candidate]
    # The top_k chunks the reply was chosen from.
    fused: list[Candidate]
    messages: list[dict[str, str]] | None
    # The model that answers for this variant, None when the service has none.
    model: str | None
    model_called: bool


class EmbeddingLRU:
    """Query embeddings by (model, normalised text); callers repeat themselves.

    Vectors are kept as float32 arrays (what PostgreSQL receives anyway): 4 bytes a
    dimension instead of a list's 32, so the full cache at 1,536 dimensions takes 25 MB
    per process, not 200 MB. asyncpg sends an array as a float4[] like a list."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], array[float]] = OrderedDict()

    def get(self, key: tuple[str, str]) -> array[float] | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: tuple[str, str], value: Sequence[float]) -> None:
        self._items[key] = array("f", value)
        if len(self._items) > self.size:
            self._items.popitem(last=False)


class QueryService:
    def __init__(
        self,
        *,
        engine: AsyncEngine,
        embedder: Embedder,
        retriever: Retriever,
        prompts: PromptLibrary,
        llm: ChatAnswerer | None,
        settings: QuerySettings,
        embed_timeout_s: float,
        prompt_fingerprint: str | None = None,
    ) -> None:
        self.engine = engine
        self.embedder = embedder
        self.retriever = retriever
        self.prompts = prompts
        self.llm = llm
        self.settings = settings
        self.conversation = Contextualiser(llm, settings)
        # An embedding that stalls must leave time for BM25 alone and the answering model:
        # waited out to the deadline, it would turn a text-only answer into "unavailable".
        self.embed_timeout_s = min(embed_timeout_s, settings.deadline_s / 2)
        self.embed_cache = EmbeddingLRU()
        # Part of the answer-cache key: a prompt change is heard at once, even one whose
        # author forgot to bump its version; so is a change of the settings that shape an
        # answer (word cap, thresholds, top_k, model, the fusion weight, the model's server).
        prompt_fingerprint = (
            prompt_fingerprint
            or hashlib.sha256(
                "|".join(prompts.get(v).version for v in prompts.variants).encode()
            ).hexdigest()[:16]
        )
        base_url = str(llm.client.base_url) if llm is not None else ""
        self.prompt_fingerprint = hashlib.sha256(
            # The memory budget shapes no answer (the in-memory search ranks as SQL does), nor
            # does the semantic cache's threshold (which answer is reused, not what it says).
            f"{prompt_fingerprint}|{settings.model_dump_json(exclude=_UNKEYED_SETTINGS)}"
            f"|{retriever.vector_weight}|{retriever.sentence_weight}|{base_url}".encode()
        ).hexdigest()[:16]
        self.answerer = settings.llm_model if llm else "extractive"
        self.sim_range = _SIMILARITY_RANGE.get(embedder_family(embedder.model_key), (0.15, 0.6))
        # Sentences are chosen by meaning when the embedder can embed them (the offline default).
        self.sentences = SentenceVectors(embedder) if isinstance(embedder, SentenceEncoder) else None
        # Paraphrases of recent answered questions (semantic_cache.py); per process.
        self.semantic_cache = SemanticAnswerCache(
            threshold=default_threshold(settings.semantic_cache_threshold, embedder.model_key),
            ttl_s=settings.answer_cache_ttl_s,
        )
        # Embedding requests left to finish after their call ended (see _respond).
        self._background: set[asyncio.Future[Sequence[float] | None]] = set()

    @property
    def kb_vectors(self) -> KBVectorCache | None:
        """The KBs held in this process's memory (the retriever's)."""
        return self.retriever.kb_vectors

    def _forget(self, task: asyncio.Future[Sequence[float] | None]) -> None:
        self._background.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: _embed logs provider failures itself

    async def close(self) -> None:
        """Cancel the embedding requests and KB loads still running in the background (at
        shutdown)."""
        if self.retriever.kb_vectors is not None:
            await self.retriever.kb_vectors.close()
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def answerer_name(self, prompt: PromptSet) -> str:
        return (prompt.model.model or self.settings.llm_model) if self.llm else "extractive"

    async def query(
        self,
        *,
        org_id: uuid.UUID,
        agent_id: uuid.UUID,
        question: str,
        history: Sequence[Turn] = (),
        variant: str | None = None,
        debug: bool = False,
        evaluation: bool = False,
        speaker: Speaker | None = None,
        filters: QueryFilters | None = None,
    ) -> QueryOutcome:
        """Answer ``question`` for the agent, made standalone from ``history`` first
        (app/query/conversation.py), from the documents ``filters`` (and the agent's own)
        select; the outcome's ``finish`` logs the call (marked as evaluation traffic when
        ``evaluation``) and caches the answer. A ``speaker`` streams the answering model's
        sentences as they are written (app/query/streaming.py)."""
        history = usable_history(history, self.settings)
        call = Call(org_id, agent_id, question, history, variant, filters, debug, speaker)
        made = await self._respond(call)
        # A partial of the coroutine function, not a lambda, so Litestar awaits it.
        return QueryOutcome(made.reply, partial(self._finish, call, made, evaluation=evaluation))

    async def dry_run(
        self,
        *,
        org_id: uuid.UUID,
        agent_id: uuid.UUID,
        question: str,
        history: Sequence[Turn] = (),
        variant: str | None = None,
        skip_model: bool = False,
    ) -> DryRunResult:
        """The playground: ``query`` in debug mode, made standalone from ``history`` as a
        call's would be, answered (and made standalone) without the model when
        ``skip_model``, and never logged, cached, nor served from the answer cache (debug
        mode reads no cached answer). Raises NotFound for an agent unknown to ``org_id``."""
        call = Call(
            org_id,
            agent_id,
            question,
            usable_history(history, self.settings),
            variant=variant,
            debug=True,
            dry=True,
            skip_model=skip_model,
        )
        made = await self._respond(call)
        debug = made.reply.debug or {}
        fused = made.found.candidates if made.found is not None else []
        messages = made.ask.messages if made.ask is not None else None
        if messages is None and fused:
            spoken = made.context is not None and made.context.attribution == "spoken"
            messages = self.model_messages(made.standalone.question, fused, made.prompt, attribution=spoken)
        return DryRunResult(
            response=made.reply,
            variant=made.prompt.variant,
            prompt_version=made.prompt.version,
            # Listed after the reply is made, so its timings are those of a real call.
            candidates=made.retrieval.every() if made.retrieval is not None else [],
            fused=fused,
            messages=messages,
            model=(made.prompt.model.model or self.settings.llm_model) if self.llm else None,
            model_called="messages" in debug,
        )

    async def _respond(self, call: Call) -> Made:
        """The three stages under the call's deadline, then attribution and escalation."""
        trace = call.trace
        # Until the agent's own variant is read (with its KBs), apologies come from the default.
        prompt = self.prompts.get_or_default(call.variant or self.settings.prompt_variant)
        standalone = Standalone(call.question, "none")
        context: Context | None = None
        looked: Retrieval | Match | None = None
        found: Found | None = None
        ask: Ask | None = None
        composed: Composed | None = None
        try:
            async with asyncio.timeout(self.settings.deadline_s):
                # The rewrite runs before the agent's context is read, whose statement already
                # looks up the answer cache under the standalone question: its prompt is the
                # call's variant or the configured default.
                standalone, waited = await self.conversation.standalone(
                    call.question, call.history, prompt, debug=call.debug, skip_model=call.skip_model
                )
                trace.llm += waited
                question = standalone.question
                normalised = normalise_question(question)
                # The question's embedding depends on nothing the database holds: it is
                # requested at once, so the provider's latency (the longest wait of a call)
                # overlaps the agent's context and BM25.
                embedding = asyncio.ensure_future(self._embed(normalised, trace))
                try:
                    async with raw_connection(self.engine) as conn:
                        context = await self._context(call, conn, question, normalised, prompt)
                        held = None
                        if context.early is None:
                            t = time.perf_counter()
                            held, corpus = await self.retriever.held(context.corpus, conn)
                            context = replace(context, corpus=corpus)
                            trace.search += (time.perf_counter() - t) * 1000
                        if context.early is None and held is None and embedding.done():
                            # No copy to search and the vector is here: on this connection.
                            looked = await self._retrieve(call, context, normalised, embedding.result(), conn)
                    if context.early is None and looked is None:
                        # The connection went back to the pool while the provider is awaited: a
                        # real embedding takes 100-300 ms, and holding a connection through it
                        # capped a process at pool_size + max_overflow calls in flight, the
                        # overflow ones paying a fresh PostgreSQL connection each (measured: own
                        # time p99 108 ms with 16 callers against a 150 ms embedding).
                        t = time.perf_counter()
                        vector = await embedding
                        trace.embed_wait += (time.perf_counter() - t) * 1000
                        looked = await self._retrieve(call, context, normalised, vector, None, held)
                finally:
                    # A request still under way when the answer cache answers is left to finish
                    # in the background: its vector lands in the LRU, and the next hit on this
                    # question (in this process) costs no provider call. Cancelled, it would be
                    # paid for and asked again on every hit.
                    cached = context is not None and context.early is not None and context.early.cached
                    self._settle(embedding, keep=cached)
                if context.early is not None:
                    answer = context.early
                elif isinstance(looked, Match):
                    answer = Answer.cached_from(looked.reply)
                else:
                    assert looked is not None
                    found = await self._judge(call, question, looked, embedding.result())
                    ask = self._ask(call, question, context, found)
                    composed = await self._compose(call, question, context, found, ask)
                    answer = composed.answer
        except AppError:
            raise
        except (TimeoutError, OSError, EmbeddingError) as exc:
            if (
                isinstance(exc, TimeoutError)
                and found is not None
                and found.candidates
                and context is not None
            ):
                # The deadline struck after retrieval (the model's own timeout normally fires
                # first, but a loaded event loop can run both timers at once): the top chunk
                # still answers.
                log.warning(
                    "query %s ran out of time after retrieval; answering from the top chunk", call.query_id
                )
                composed = Composed(self._fallback(standalone.question, found, context.prompt))
            else:
                log.warning("query %s could not be answered: %s", call.query_id, type(exc).__name__)
                composed = Composed(self._reply("unavailable", prompt.unavailable_reply, 0.0, []))
            answer = composed.answer
        except Exception as exc:
            # Database errors and anything unforeseen: a spoken apology, never a 500.
            log.exception("query %s failed", call.query_id, exc_info=exc)
            composed = Composed(self._reply("unavailable", prompt.unavailable_reply, 0.0, []))
            answer = composed.answer
        return self._made(call, standalone, context, looked, found, ask, composed, answer)

    def _settle(self, embedding: asyncio.Future[Sequence[float] | None], *, keep: bool) -> None:
        """The question's embedding once the call no longer needs it: left to finish when
        ``keep``, else cancelled; a finished one's failure is retrieved, so it is not reported
        twice."""
        if not embedding.done():
            if keep:
                self._background.add(embedding)
                embedding.add_done_callback(self._forget)
            else:
                embedding.cancel()
        elif not embedding.cancelled():
            embedding.exception()

    # Stage 1 ----------------------------------------------------------------------------

    async def _context(
        self, call: Call, conn: Any, question: str, normalised: str, prompt: PromptSet
    ) -> Context:
        """The agent's context, the answer cache and BM25 in one round trip; raises NotFound
        for an unknown agent and ValidationFailed for an attribute key no document has."""
        key_material = (
            f"{call.agent_id}|{normalised}|{self.prompt_fingerprint}|{self.answerer}"
            f"|{self.embedder.model_key}"
        )
        t = time.perf_counter()
        ctx = await conn.fetchrow(
            sql.AGENT_CONTEXT_SQL,
            call.org_id,
            call.agent_id,
            key_material,
            call.variant,
            self.settings.prompt_variant,
            question,
            self.retriever.candidates,
            call.debug,  # BM25 runs in debug mode even when an answer is cached
            json.dumps(to_clauses(call.filters)),
            attribute_keys(call.filters),
            self.retriever.ranks_text_in_memory(call.org_id, call.agent_id),
        )
        call.trace.search += (time.perf_counter() - t) * 1000
        if not ctx["kb_ids"] and not ctx["known"]:
            # An agent becomes known to an organisation when a KB of it is first assigned
            # to it: never, and the agent is unknown here (another organisation's included).
            raise NotFound(AGENT_NOT_FOUND)
        require_known_keys(attribute_keys(call.filters), ctx["known_keys"])
        prompt = self.prompts.get_or_default(ctx["variant"], self.settings.prompt_variant)
        early: Answer | None = None
        if ctx["chunk_total"] == 0:
            # Nothing assigned any more, or nothing ready yet: a spoken "I don't know".
            early = self._reply("not_found", prompt.not_found_reply, 0.0, [])
        elif ctx["cached"] is not None and not call.debug:
            # SQLAlchemy's asyncpg set-up decodes jsonb on its pooled connections.
            raw = ctx["cached"]
            early = Answer.cached_from(raw if isinstance(raw, dict) else json.loads(raw))
        return Context(
            prompt=prompt,
            cache_key=ctx["cache_key"],
            on_not_found=ctx["on_not_found"],
            topics=ctx["topics"],
            attribution=ctx["attribution"],
            filters_applied=applied(call.filters, ctx["agent_clauses"], ctx["hidden_documents"]),
            corpus=self.retriever.corpus(call.org_id, call.agent_id, question, ctx),
            early=early,
            scope=None
            if early is not None
            else scope_of(
                call.org_id,
                call.agent_id,
                ctx,
                self.prompt_fingerprint,
                self.answerer,
                self.embedder.model_key,
            ),
        )

    # Stage 2 ----------------------------------------------------------------------------

    async def _retrieve(
        self,
        call: Call,
        context: Context,
        normalised: str,
        vector: Sequence[float] | None,
        conn: Any,
        held: list[KBVectors] | None = None,
    ) -> Retrieval | Match:
        """The answer of a paraphrase answered before in the call's scope (semantic_cache.py),
        else the chunks the retriever finds. A dry run (the playground) always retrieves: it
        shows what the prompt is given, which a reused answer never was."""
        if vector is not None and self.semantic_cache.enabled and context.scope is not None and not call.dry:
            match = self.semantic_cache.lookup(context.scope, normalised, vector)
            if match is not None:
                return match
        retrieval = await self.retriever.search(
            context.corpus, vector, held=held, top_k=self.settings.top_k, conn=conn, complete=call.debug
        )
        call.trace.search += retrieval.timing_ms
        if not call.dry:
            SEARCH_PLANS.labels(retrieval.plan).inc()
            TEXT_PLANS.labels(retrieval.text_plan).inc()
        return retrieval

    async def _judge(
        self, call: Call, question: str, retrieval: Retrieval, vector: Sequence[float] | None
    ) -> Found:
        """The sentence that answers by meaning (when the embedder can embed sentences), and
        the confidence with the threshold it is held to."""
        candidates = retrieval.candidates
        evidence: ExtractiveAnswer | None = None
        by_meaning = self.sentences is not None and vector is not None and bool(candidates)
        if not any(not term.isdigit() for term in lexical_terms(question)) and not _ASKING.search(question):
            # "a", "it", "123": a question that names nothing and asks nothing has no answer to
            # find; whatever sentence came nearest would be read out as one. ("Where are you?"
            # names nothing either, yet asks for the address.)
            threshold = self.settings.min_answer_confidence if by_meaning else self.settings.min_confidence
            return Found(retrieval, vector, None, 0.0, {"names_nothing": 1.0, "confidence": 0.0}, threshold)
        if by_meaning:
            assert vector is not None
            evidence = await self._evidence(question, vector, candidates, call.trace)
            chosen = candidates[evidence.passage_index] if evidence is not None else None
            confidence, parts = calibrated_confidence(evidence, chosen.cosine_rank if chosen else None)
            threshold = self.settings.min_answer_confidence
        else:
            confidence, parts = self.confidence(question, candidates)
            threshold = self.settings.min_confidence
        return Found(retrieval, vector, evidence, confidence, parts, threshold)

    async def _evidence(
        self, question: str, vector: Sequence[float], candidates: list[Candidate], trace: _Trace
    ) -> ExtractiveAnswer | None:
        """The sentence of the top passages that best answers the question, by meaning."""
        assert self.sentences is not None
        top = candidates[:_ANSWER_PASSAGES]
        t = time.perf_counter()
        vectors = await self.sentences.for_passages(self.engine, top)
        trace.search += (time.perf_counter() - t) * 1000
        question_vector = np.asarray(vector, dtype=np.float32)
        passages = [Passage(text=c.text, title=c.title, score=c.score, section=c.section) for c in top]
        return extractive_answer(
            question,
            passages,
            max_words=self.settings.max_answer_words,
            semantics=Semantics(question=question_vector[None, :], sentences=vectors),
        )

    def confidence(self, question: str, candidates: list[Candidate]) -> tuple[float, dict[str, float]]:
        """0..1 from retrieval alone: how much of the question the best chunks cover, and
        how close the best vector hit is (on the embedder's own scale)."""
        if not candidates:
            return 0.0, {"coverage": 0.0, "similarity": 0.0, "confidence": 0.0}
        terms = set(lexical_terms(question))
        coverage = 0.0
        if terms:
            for c in candidates[:3]:
                coverage = max(coverage, len(terms & term_set(_passage(c))) / len(terms))
        best_sim = max((c.similarity for c in candidates if c.similarity is not None), default=None)
        lo, hi = self.sim_range
        if best_sim is None:
            value = coverage
            sim_scaled = 0.0
        else:
            sim_scaled = min(1.0, max(0.0, (best_sim - lo) / (hi - lo)))
            value = 0.5 * coverage + 0.5 * sim_scaled
        value = round(value, 4)
        return value, {
            "coverage": round(coverage, 4),
            "similarity": round(sim_scaled, 4),
            "confidence": value,
        }

    def model_messages(
        self, question: str, candidates: Sequence[Candidate], prompt: PromptSet, *, attribution: bool = False
    ) -> list[dict[str, str]]:
        """The chat messages the answering model is sent for these chunks; with
        ``attribution``, each carries its speakable title and the prompt asks to name it."""
        items = [
            KnowledgeItem(
                title=c.title,
                section=c.section,
                page=c.page,
                text=c.text,
                spoken_title=speakable_title(c.title) if attribution else None,
            )
            for c in candidates
        ]
        return prompt.messages(
            question=question, items=items, max_words=self.settings.max_answer_words, attribution=attribution
        )

    # Stage 3 ----------------------------------------------------------------------------

    def _ask(self, call: Call, question: str, context: Context, found: Found) -> Ask | None:
        """The messages for the answering model, when it is to answer."""
        if not found.candidates or found.confidence < found.threshold or self.llm is None or call.skip_model:
            return None
        messages = self.model_messages(
            question, found.candidates, context.prompt, attribution=context.attribution == "spoken"
        )
        return Ask(messages, self.answerer_name(context.prompt))

    async def _compose(
        self, call: Call, question: str, context: Context, found: Found, ask: Ask | None
    ) -> Composed:
        prompt, candidates, confidence = context.prompt, found.candidates, found.confidence
        if not candidates or confidence < found.threshold:
            return Composed(self._reply("not_found", prompt.not_found_reply, confidence, []))
        if ask is not None:
            return await self._generate(call, question, context, found, ask)
        if found.evidence is not None:
            return Composed(
                self._answered(found.evidence.text, confidence, candidates, found.evidence.passages)
            )
        return Composed(self._extractive(question, candidates, confidence, prompt))

    def _extractive(
        self,
        question: str,
        candidates: list[Candidate],
        confidence: float,
        prompt: PromptSet,
    ) -> Answer:
        passages = [Passage(text=c.text, title=c.title, score=c.score) for c in candidates[:3]]
        result = extractive_answer(question, passages, max_words=self.settings.max_answer_words)
        if result is None or result.support < self.settings.min_support:
            # No sentence answers: what retrieval scored says nothing of an answer there is none
            # of (a not_found above the gate read as a contradiction to a voice runtime).
            return self._reply("not_found", prompt.not_found_reply, 0.0, [])
        return self._answered(result.text, confidence, candidates, result.passages)

    async def _generate(
        self, call: Call, question: str, context: Context, found: Found, ask: Ask
    ) -> Composed:
        assert self.llm is not None
        prompt, candidates, confidence = context.prompt, found.candidates, found.confidence
        elapsed = time.perf_counter() - call.trace.t0
        # Keep a slice of the deadline for the fallback answer and the response itself.
        budget = self.settings.deadline_s - elapsed - 0.1
        # A topic the agent hands over replaces this answer by the transfer line: none of it is spoken.
        passages = [_passage(c) for c in candidates]
        answer: Callable[..., Awaitable[LLMResult]]
        if call.speaker is not None and matched_topic(question, context.topics) is None:
            # Each sentence is checked before it is said: a spoken one cannot be taken back.
            check = partial(self._unfit, question=question, passages=passages, messages=ask.messages)
            answer = partial(call.speaker.speak, self.llm, prompt.holding_reply, check=check)
        else:
            answer = self.llm.complete
        t = time.perf_counter()
        try:
            result = await answer(
                ask.messages,
                model=ask.model,
                temperature=prompt.model.temperature,
                max_tokens=prompt.model.max_tokens or self.settings.llm_max_tokens,
                timeout=budget,
            )
        except LLMError as exc:
            if call.speaker is None or call.speaker.refused is None:  # a refused sentence is no fault of it
                PROVIDER_ERRORS.labels("chat").inc()
            log.warning("answering model failed (%s); answering from the top chunk", exc.reason)
            return Composed(self._fallback(question, found, prompt), llm_error=exc.reason)
        finally:
            call.trace.llm += (time.perf_counter() - t) * 1000
        tokens = {"prompt": result.prompt_tokens, "completion": result.completion_tokens}
        text = result.text.strip()
        broken = result.broken
        if NOT_FOUND_MARK in text or not text or declines(text):
            return Composed(self._reply("not_found", prompt.not_found_reply, 0.0, []), tokens)
        if (fault := self._unfit(text, question, passages, ask.messages)) is not None:
            log.warning("answering model's answer refused (%s)", fault)
            spoken = call.speaker.spoken if call.speaker is not None else ""
            if not spoken:
                return Composed(self._fallback(question, found, prompt), tokens, llm_error=fault)
            # Its last sentence, said only once the answer is whole: the ones before it were
            # checked and said, and stand; the answer ends with them.
            text, broken = spoken, fault
        said = make_speakable(strip_citations(text), max_words=self.settings.max_answer_words)
        if not said:  # nothing speakable came back (emoji, bare markup)
            return Composed(self._reply("not_found", prompt.not_found_reply, 0.0, []), tokens)
        # Which chunks the model drew on is inferred from the words its answer shares with
        # them (app/answering/attribution.py): the model is asked for no citation.
        reply = self._answered(said, confidence, candidates, used_passages(text, question, passages))
        # A stream broken off after sentences already spoken: they stand, but are not cached.
        reply.degraded = broken is not None
        return Composed(reply, tokens, llm_error=broken)

    @staticmethod
    def _unfit(text: str, question: str, passages: list[str], messages: list[dict[str, str]]) -> str | None:
        """Why the model's answer (or a sentence of it) must not be spoken, if it must not:
        data or code instead of sentences, a number that neither the passages it was given
        nor the question holds (made up, or cut from a longer one), its instructions
        repeated (the system message), or text written to steer a model."""
        if is_not_speech(strip_citations(text)):
            return "the model answered with data or code, not sentences"
        if missing := numbers_not_in(text, [*passages, question]):
            return f"the model's answer holds numbers the knowledge does not: {', '.join(missing[:3])}"
        if echoes(text, messages[0]["content"], [*passages, question]):
            return "the model's answer repeats its instructions"
        if looks_like_instructions(text):  # a chat template's tokens, "SYSTEM:"...
            return "the model's answer holds text written to steer a model"
        return None

    def _fallback(self, question: str, found: Found, prompt: PromptSet) -> Answer:
        """The answering model failed or ran out of time: read out the sentence chosen by
        meaning (the offline default), else the best sentence of the top chunk by words."""
        candidates, confidence, evidence = found.candidates, found.confidence, found.evidence
        if evidence is not None:
            reply = self._answered(evidence.text, confidence, candidates, evidence.passages)
            reply.degraded = True
            return reply
        top = candidates[0]
        result = extractive_answer(
            question,
            [Passage(text=top.text, title=top.title, score=top.score)],
            max_words=self.settings.max_answer_words,
        )
        text = result.text if result else make_speakable(top.text, max_words=self.settings.max_answer_words)
        reply = self._answered(text or prompt.unavailable_reply, confidence, candidates, (0,))
        reply.degraded = True
        return reply

    @staticmethod
    def _reply(status: Status, answer: str, confidence: float, sources: list[dict[str, Any]]) -> Answer:
        return Answer(answer, status, confidence, sources)

    def _answered(
        self, text: str, confidence: float, candidates: Sequence[Candidate], used: Sequence[int]
    ) -> Answer:
        """An answered reply read from the candidates at ``used``: its ``used_sources`` are
        their chunk ids, and its ``sources`` list them first."""
        reply = self._reply("answered", text, confidence, answer_sources(candidates, used))
        reply.used_sources = [candidates[i].chunk_id for i in dict.fromkeys(used)]
        return reply

    # The reply ---------------------------------------------------------------------------

    def _made(
        self,
        call: Call,
        standalone: Standalone,
        context: Context | None,
        looked: Retrieval | Match | None,
        found: Found | None,
        ask: Ask | None,
        composed: Composed | None,
        answer: Answer,
    ) -> Made:
        """The reply to send: ``answer`` attributed to its source, under the agent's
        escalation policy, with the call's id, timings and (debug mode) details."""
        prompt = (
            context.prompt
            if context is not None
            else self.prompts.get_or_default(call.variant or self.settings.prompt_variant)
        )
        question = standalone.question
        attribution = self._attribute(answer, prompt, context, found)
        # The cache keeps what the knowledge gave; the agent's policy is applied on top of
        # every reply, cached or not, so a change to it is heard on the next call.
        knowledge_reply = answer.stored()
        on_not_found, topics = (context.on_not_found, context.topics) if context is not None else ("say", [])
        topic = matched_topic(question, topics)
        if topic is not None:
            reason: str | None = f"topic:{topic}"
        elif answer.status == "not_found" and on_not_found == "transfer":
            reason = "not_found"
        else:
            reason = None
        reply = QueryReply(
            answer=answer.answer if reason is None else prompt.transfer_reply,
            status=answer.status,
            confidence=answer.confidence,
            sources=answer.sources if reason is None else [],
            used_sources=answer.used_sources if reason is None else [],
            action=_ACTIONS[answer.status] if reason is None else "transfer",
            transfer_reason=reason,
            query_id=str(call.query_id),
            cached=answer.cached,
            degraded=answer.degraded,
            timings_ms=call.trace.timings(),
        )
        match = looked if isinstance(looked, Match) else None
        retrieval = looked if isinstance(looked, Retrieval) else None
        if call.debug:
            debug: dict[str, Any] = {}
            if context is not None:
                debug["filters"] = context.filters_applied
            if match is not None:
                debug["semantic_cache"] = match.debug()
            if found is not None:
                debug.update(
                    plan=found.retrieval.plan,
                    text_plan=found.retrieval.text_plan,
                    embedded=found.retrieval.embedded,
                    candidates=[_debug_candidate(c) for c in found.candidates],
                    confidence=found.parts,
                )
            if ask is not None:
                debug.update(messages=ask.messages, model=ask.model)
            if composed is not None and composed.llm_error is not None:
                debug["llm_error"] = composed.llm_error
            if composed is not None and composed.tokens is not None:
                debug["tokens"] = composed.tokens
            debug["attribution"] = attribution
            debug["escalation"] = {
                "on_not_found": on_not_found,
                "topics": list(topics),
                "matched_topic": topic,
                "knowledge_reply": knowledge_reply if reason is not None else None,
            }
            debug["context"] = standalone.debug(call.question)
            reply.debug = debug
        return Made(reply, knowledge_reply, prompt, standalone, context, retrieval, found, ask, match)

    def _attribute(
        self, answer: Answer, prompt: PromptSet, context: Context | None, found: Found | None
    ) -> dict[str, Any]:
        """For an agent whose answers name their source: an answer cut from the passages (no
        model, or the model failed) is led by the phrase of ``reply.attribution.md`` with the
        speakable title of the document its first sentence came from; none when that title
        has nothing speakable. A model's answer names its source itself (grounding.attribution.md).
        A cached answer already carries its phrase; not_found and unavailable name nothing.
        Returns what debug mode shows of it."""
        mode = context.attribution if context is not None else "off"
        title = None
        read_out = self.llm is None or answer.degraded
        # The fallback's apology (a top chunk with nothing speakable) is no answer to attribute.
        fresh = answer.status == "answered" and not answer.cached
        if mode == "spoken" and read_out and fresh and answer.answer != prompt.unavailable_reply:
            candidates = found.candidates if found is not None else []
            titles = {c.chunk_id: c.title for c in candidates}
            first = answer.used_sources[0] if answer.used_sources else None
            title = speakable_title(titles.get(first)) if first is not None else None
            if title is not None:
                phrase = prompt.attributed(title=title, answer="")
                answer.answer = make_speakable(
                    prompt.attributed(title=title, answer=lower_first(answer.answer)),
                    max_words=self.settings.max_answer_words + len(phrase.split()),
                )
        used_from = None
        if fresh:
            used_from = "the sentences read out" if read_out else "overlap with the model's answer"
        return {"mode": mode, "spoken_title": title, "used_sources_from": used_from}

    async def _finish(self, call: Call, made: Made, *, evaluation: bool) -> None:
        """After the response is sent: store the answer in the cache and log the call."""
        response, context = made.reply, made.context
        cache_key = context.cache_key if context is not None else None
        cacheable = (
            response.status in ("answered", "not_found")
            and not response.degraded
            and not response.cached
            and cache_key is not None
            and self.settings.answer_cache_ttl_s > 0
            # Found by words alone while the embedder was failing: not what the question
            # will find once it answers again.
            and (made.retrieval is None or made.retrieval.embedded)
        )
        normalised = normalise_question(made.standalone.question)
        # A paraphrase may reuse only what the knowledge answered, in full, and spoken as it
        # was: never not_found, a degraded answer or a transfer (semantic_cache.py).
        if (
            cacheable
            and response.status == "answered"
            and response.action == "answer"
            and self.semantic_cache.enabled
            and context is not None
            and context.scope is not None
            and (vector := self.embed_cache.get((self.embedder.model_key, normalised))) is not None
        ):
            self.semantic_cache.store(
                context.scope, normalised, vector, query_id=call.query_id, reply=made.knowledge_reply
            )
        chunks = [
            {
                "chunk_id": c.chunk_id,
                "score": round(c.score, 5),
                "vector_rank": c.vector_rank,
                "text_rank": c.text_rank,
            }
            for c in (made.retrieval.candidates if made.retrieval is not None else ())
        ]
        standalone, match = made.standalone, made.match
        filters_applied = context.filters_applied if context is not None else None
        try:
            async with raw_connection(self.engine) as conn:
                await conn.execute(
                    sql.FINISH_SQL,
                    call.query_id,
                    call.org_id,
                    call.agent_id,
                    call.question,
                    normalised,
                    response.status,
                    response.confidence,
                    json.dumps(chunks),
                    response.answer,
                    made.prompt.variant,
                    made.prompt.version,
                    self.answerer_name(made.prompt),
                    json.dumps(response.timings_ms),
                    response.cached,
                    response.degraded,
                    cache_key if cacheable else None,
                    json.dumps(made.knowledge_reply) if cacheable else None,
                    self.settings.answer_cache_ttl_s,
                    evaluation,
                    response.action,
                    response.transfer_reason,
                    standalone.question if standalone.method != "none" else None,
                    standalone.method,
                    response.used_sources,
                    match.question if match else None,
                    match.similarity if match else None,
                    match.query_id if match else None,
                    json.dumps(filters_applied) if filters_applied else None,
                )
        except Exception:
            log.warning("could not record query %s", call.query_id, exc_info=True)

    async def question_vector(self, question: str) -> Sequence[float] | None:
        """The vector a call searches and caches with for ``question`` (benchmarks)."""
        return await self._embed(normalise_question(question), _Trace())

    async def _embed(self, normalised: str, trace: _Trace) -> Sequence[float] | None:
        if not normalised:
            return None  # punctuation only: nothing to embed (the API rejects empty input)
        key = (self.embedder.model_key, normalised)
        cached = self.embed_cache.get(key)
        if cached is not None:
            return cached
        t = time.perf_counter()
        try:
            vector = await self.embedder.embed_query(normalised, timeout=self.embed_timeout_s)
            if self.sentences is not None:
                vector = await self._lead_with_the_asking_part(normalised, vector)
        except EmbeddingError as exc:
            PROVIDER_ERRORS.labels("embedding").inc()
            log.warning("query embedding failed, using BM25 only: %s", exc)
            return None
        finally:
            trace.embed += (time.perf_counter() - t) * 1000
        self.embed_cache.put(key, vector)
        return vector

    async def _lead_with_the_asking_part(self, normalised: str, vector: list[float]) -> list[float]:
        """A long turn's vector: the part that asks leads, the preamble still says what it is
        about ("she's in a wheelchair, so how does she get in?"). Offline embedder only: a
        second provider call would cost more than it brings."""
        focus = normalise_question(asking_part(normalised))
        if not focus or focus == normalised:
            return vector
        try:
            # Half the budget again at most: the whole turn's vector alone will do.
            asking = await self.embedder.embed_query(focus, timeout=self.embed_timeout_s / 2)
        except EmbeddingError as exc:
            log.warning("embedding the asking part failed, using the whole turn: %s", exc)
            return vector
        blend = _WHOLE_TURN_WEIGHT * np.asarray(vector) + (1 - _WHOLE_TURN_WEIGHT) * np.asarray(asking)
        result: list[float] = (blend / np.linalg.norm(blend)).tolist()
        return result


def answer_sources(candidates: Sequence[Candidate], used: Sequence[int] = ()) -> list[dict[str, Any]]:
    """An answered reply's ``sources``: the candidates at ``used`` (the chunks the answer was
    read from, in that order), then those whose fused score is above zero and at least
    SOURCE_SCORE_FLOOR of the best one's, in rank order. A zero score is a chunk found only
    by a list with no say (the vectors, with the lexical embedder): not a source unless read
    from. An answer rests on something: with none of these (a model's answer over unscored
    chunks), the best candidate is its source."""
    if not candidates:
        return []
    floor = SOURCE_SCORE_FLOOR * candidates[0].score  # candidates come best first
    order = list(dict.fromkeys(used))
    order += [i for i, c in enumerate(candidates) if c.score > 0 and c.score >= floor and i not in order]
    return [_source(candidates[i]) for i in order or (0,)]


def _passage(c: Candidate) -> str:
    """A chunk's words as the confidence and the attribution read them (``term_set`` caches
    their terms under this string)."""
    return f"{c.title}\n{c.section or ''}\n{c.text}"


def _source(c: Candidate) -> dict[str, Any]:
    return {
        "document_id": str(c.document_id),
        "title": c.title,
        "section": c.section,
        "page": c.page,
        "chunk_id": c.chunk_id,
        "score": round(c.score, 5),
    }


def _debug_candidate(c: Candidate) -> dict[str, Any]:
    return {
        **_source(c),
        "vector_rank": c.vector_rank,
        "cosine_rank": c.cosine_rank,
        "text_rank": c.text_rank,
        "similarity": c.similarity,
        "text_score": c.text_score,
        "text": c.text,
    }
