"""query_knowledge: the voice model's tool. Written for speed on purpose: raw asyncpg,
two round trips to the database, nothing recomputed that can be computed once, and a
deadline over the whole request so a caller never hears silence for long."""

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
from dataclasses import dataclass, field
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
    texts_to_embed,
)
from app.answering.llm import ChatAnswerer, LLMError, LLMResult
from app.answering.speech import make_speakable
from app.config import QuerySettings
from app.db.engine import raw_connection
from app.embeddings.base import Embedder, EmbeddingError, embedder_family
from app.embeddings.lexical import lexical_terms
from app.errors import AppError, NotFound
from app.observability.metrics import PROVIDER_ERRORS, SEARCH_PLANS
from app.prompting import KnowledgeItem, PromptLibrary, PromptSet
from app.query import repository as sql
from app.query.confidence import calibrated_confidence
from app.query.conversation import Contextualiser, Standalone, Turn, check_history
from app.query.filters import QueryFilters, applied, attribute_keys, require_known_keys, to_clauses
from app.query.kb_vectors import KBVectorCache, KBVectors
from app.query.retrieval import Candidate, Retrieval, Retriever, TextHits
from app.query.semantic_cache import SemanticAnswerCache, default_threshold, scope_of
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
_ACTIONS = {"answered": "answer", "not_found": "say_not_found", "unavailable": "say_unavailable"}
# A reply's fields the answer cache stores.
_CACHED_FIELDS = ("answer", "status", "confidence", "sources", "used_sources", "degraded")
# Settings outside the answer cache's key (see QueryService.__init__).
_UNKEYED_SETTINGS = {"vector_cache_mb", "semantic_cache_threshold"}


def normalise_question(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return _TRAILING.sub("", _SPACES.sub(" ", text).strip())


@dataclass(slots=True)
class QueryOutcome:
    """What the endpoint returns, plus the work to do after the response is sent."""

    response: dict[str, Any]
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


# What the retrieval was given: BM25's hits, the question's vector, the agent's KBs, their
# chunk count, and their in-memory copies when searched in memory.
_RetrievalInputs = tuple[TextHits, Sequence[float] | None, list[uuid.UUID], int, list[KBVectors] | None]


@dataclass(slots=True)
class _DryRun:
    """A playground call in flight: whether to skip the model, and what the retrieval was
    given, kept so that every candidate of both lists can be listed once the reply is made."""

    skip_model: bool
    inputs: _RetrievalInputs | None = None


@dataclass(frozen=True, slots=True)
class DryRunResult:
    """A query_knowledge reply as it would be given (with its debug details), plus what the
    playground shows beside it; nothing of it was logged or cached."""

    response: dict[str, Any]
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
            f"|{retriever.vector_weight}|{base_url}".encode()
        ).hexdigest()[:16]
        self.sim_range = _SIMILARITY_RANGE.get(embedder_family(embedder.model_key), (0.15, 0.6))
        self.kb_vectors = KBVectorCache(
            engine, model_key=embedder.model_key, budget_bytes=settings.vector_cache_mb * 1024 * 1024
        )
        # Sentences are chosen by meaning when the embedder can embed them (the offline default).
        self.sentences = SentenceVectors(embedder) if isinstance(embedder, SentenceEncoder) else None
        # Paraphrases of recent answered questions (semantic_cache.py); per process.
        self.semantic_cache = SemanticAnswerCache(
            threshold=default_threshold(settings.semantic_cache_threshold, embedder.model_key),
            ttl_s=settings.answer_cache_ttl_s,
        )
        # Embedding requests left to finish after their call ended (see _answer).
        self._background: set[asyncio.Future[Sequence[float] | None]] = set()

    def _forget(self, task: asyncio.Future[Sequence[float] | None]) -> None:
        self._background.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: _embed logs provider failures itself

    async def close(self) -> None:
        """Cancel the embedding requests and KB loads still running in the background (at
        shutdown)."""
        await self.kb_vectors.close()
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
        check_history(history, self.settings)
        response, state = await self._respond(
            org_id,
            agent_id,
            question,
            history,
            variant,
            debug=debug,
            dry=None,
            speaker=speaker,
            filters=filters,
        )
        prompt = state["prompt"]
        model = self.answerer_name(prompt)
        return QueryOutcome(
            response,
            # A partial of the coroutine function, not a lambda, so Litestar awaits it.
            partial(
                self._finish,
                org_id,
                agent_id,
                question,
                state["normalised"],
                prompt,
                model,
                response,
                state,
                evaluation=evaluation,
            ),
        )

    async def dry_run(
        self,
        *,
        org_id: uuid.UUID,
        agent_id: uuid.UUID,
        question: str,
        variant: str | None = None,
        skip_model: bool = False,
    ) -> DryRunResult:
        """The playground: ``query`` in debug mode, answered by the extractive answerer when
        ``skip_model``, and never logged, cached, nor served from the answer cache (debug
        mode reads no cached answer). Raises NotFound for an agent unknown to ``org_id``."""
        dry = _DryRun(skip_model=skip_model)
        response, state = await self._respond(org_id, agent_id, question, (), variant, debug=True, dry=dry)
        prompt: PromptSet = state["prompt"]
        debug = response["debug"]
        fused: list[Candidate] = state["found"][0] if state.get("found") else []
        # Listed after the reply is made, so its timings are those of a real call.
        candidates = (
            await self._every_candidate(dry.inputs, state["hidden"]) if dry.inputs is not None else []
        )
        messages = debug.get("messages")
        if messages is None and fused:
            messages = self.model_messages(
                question, fused, prompt, attribution=state.get("attribution") == "spoken"
            )
        return DryRunResult(
            response=response,
            variant=prompt.variant,
            prompt_version=prompt.version,
            candidates=candidates,
            fused=fused,
            messages=messages,
            model=(prompt.model.model or self.settings.llm_model) if self.llm else None,
            model_called="messages" in debug,
        )

    async def _every_candidate(
        self, inputs: _RetrievalInputs, hidden: Sequence[uuid.UUID]
    ) -> list[Candidate]:
        """The fusion again, over the same lists, keeping every chunk: the union of BM25's
        and the vectors' ``candidates`` each, with their ranks, scores and fused score."""
        text, vector, kb_ids, chunk_total, held = inputs
        every = 2 * self.settings.candidates
        found: Retrieval | None = None
        if held is not None:
            found = await self.retriever.fuse_memory(
                held,
                text=text,
                vector=vector,
                candidates=self.settings.candidates,
                top_k=every,
                hidden=hidden,
            )
        if found is None:
            async with raw_connection(self.engine) as conn:
                found = await self._fuse(conn, text, vector, kb_ids, chunk_total, hidden, top_k=every)
        return found.candidates

    async def _respond(
        self,
        org_id: uuid.UUID,
        agent_id: uuid.UUID,
        question: str,
        history: Sequence[Turn],
        variant: str | None,
        *,
        debug: bool,
        dry: _DryRun | None,
        speaker: Speaker | None = None,
        filters: QueryFilters | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The reply, and the state its making left for ``_finish`` and the playground."""
        trace = _Trace()
        query_id = uuid.uuid4()
        caller_question = question
        # Until the agent's own variant is read (with its KBs), apologies come from the default.
        prompt = self.prompts.get_or_default(variant or self.settings.prompt_variant)
        state: dict[str, Any] = {
            "chunks": [],
            "cache_key": None,
            "debug": {} if debug else None,
            "prompt": prompt,
            "variant": variant,
            "standalone": Standalone(question, "none"),
            "dry": dry,
            "speaker": speaker,
            "filters": filters,
            "hidden": [],
            "filters_applied": None,
        }
        try:
            async with asyncio.timeout(self.settings.deadline_s):
                # The rewrite runs before the agent's context is read, whose statement already
                # looks up the answer cache under the standalone question: its prompt is the
                # call's variant or the configured default.
                standalone, waited = await self.conversation.standalone(
                    question, history, prompt, debug=debug
                )
                trace.llm += waited
                state["standalone"] = standalone
                question = standalone.question
                response = await self._answer(
                    org_id, agent_id, question, normalise_question(question), trace, state
                )
        except AppError:
            raise
        except (TimeoutError, OSError, EmbeddingError) as exc:
            found = state.get("found")
            if isinstance(exc, TimeoutError) and found is not None:
                # The deadline struck after retrieval (the model's own timeout normally fires
                # first, but a loaded event loop can run both timers at once): the top chunk
                # still answers.
                log.warning(
                    "query %s ran out of time after retrieval; answering from the top chunk", query_id
                )
                candidates, confidence = found
                response = self._fallback(
                    question, candidates, confidence, state["prompt"], state.get("evidence")
                )
            else:
                log.warning("query %s could not be answered: %s", query_id, type(exc).__name__)
                response = self._reply("unavailable", prompt.unavailable_reply, 0.0, [])
        except Exception as exc:
            # Database errors and anything unforeseen: a spoken apology, never a 500.
            log.exception("query %s failed", query_id, exc_info=exc)
            response = self._reply("unavailable", prompt.unavailable_reply, 0.0, [])
        prompt = state["prompt"]
        question = state["standalone"].question
        state["normalised"] = normalise_question(question)
        self._attribute(response, prompt, state)
        # The cache keeps what the knowledge gave; the agent's policy is applied on top of
        # every reply, cached or not, so a change to it is heard on the next call.
        state["knowledge_reply"] = {k: response[k] for k in _CACHED_FIELDS}
        self._escalate(response, question, prompt, state)
        response["query_id"] = str(query_id)
        response["timings_ms"] = trace.timings()
        if debug:
            response["debug"] = state["debug"]
            response["debug"]["context"] = state["standalone"].debug(caller_question)
        return response, state

    async def _answer(
        self,
        org_id: uuid.UUID,
        agent_id: uuid.UUID,
        question: str,
        normalised: str,
        trace: _Trace,
        state: dict[str, Any],
    ) -> dict[str, Any]:
        answerer = self.settings.llm_model if self.llm else "extractive"
        key_material = (
            f"{agent_id}|{normalised}|{self.prompt_fingerprint}|{answerer}|{self.embedder.model_key}"
        )
        # The question's embedding depends on nothing the database holds: it is requested at
        # once, so the provider's latency (the longest wait of a call) overlaps the agent's
        # context and BM25. When the answer then comes from the answer cache, a request
        # already under way is left to finish in the background: its vector lands in the
        # LRU, and the next hit on this question (in this process) costs no provider call.
        # Cancelled, it would be paid for and asked again on every hit.
        embedding = asyncio.ensure_future(self._embed(normalised, trace))
        try:
            t = time.perf_counter()
            async with raw_connection(self.engine) as conn:
                # The agent's context, the answer cache and BM25 in one round trip.
                ctx = await conn.fetchrow(
                    sql.AGENT_CONTEXT_SQL,
                    org_id,
                    agent_id,
                    key_material,
                    state["variant"],
                    self.settings.prompt_variant,
                    question,
                    self.settings.candidates,
                    state["debug"] is not None,
                    json.dumps(to_clauses(state["filters"])),
                    attribute_keys(state["filters"]),
                )
                trace.search += (time.perf_counter() - t) * 1000
                if (early := self._early_reply(ctx, state)) is not None:
                    return early
                state["scope"] = scope_of(
                    org_id, agent_id, ctx, self.prompt_fingerprint, answerer, self.embedder.model_key
                )
                kb_ids, chunk_total = ctx["kb_ids"], ctx["chunk_total"]
                text = TextHits(ctx["text_ids"] or [], ctx["text_ranks"] or [])
                # The agent's KBs held in memory at the versions just read (kb_vectors.py):
                # then the vector search needs no second round trip.
                held: list[KBVectors] | None = None
                if self.retriever.plan(chunk_total) == "exact":
                    held = self.kb_vectors.lookup(org_id, kb_ids, ctx["kb_versions"], ctx["kb_changed"])
                found: Retrieval | None = None
                if held is None and embedding.done():
                    if (reused := self._reuse(normalised, embedding.result(), state)) is not None:
                        return reused
                    found = await self._fuse(
                        conn, text, embedding.result(), kb_ids, chunk_total, state["hidden"]
                    )
            if found is None:
                # The connection goes back to the pool while the provider is awaited: a real
                # embedding takes 100-300 ms, and holding a connection through it capped a
                # process at pool_size + max_overflow calls in flight, the overflow ones
                # paying a fresh PostgreSQL connection each (measured: own time p99 108 ms
                # with 16 callers against a 150 ms embedding).
                t = time.perf_counter()
                vector = await embedding
                trace.embed_wait += (time.perf_counter() - t) * 1000
                if (reused := self._reuse(normalised, vector, state)) is not None:
                    return reused
                if held is not None:
                    found = await self.retriever.fuse_memory(
                        held,
                        text=text,
                        vector=vector,
                        candidates=self.settings.candidates,
                        top_k=self.settings.top_k,
                        hidden=state["hidden"],
                    )
                if found is None:
                    async with raw_connection(self.engine) as conn:
                        found = await self._fuse(conn, text, vector, kb_ids, chunk_total, state["hidden"])
        finally:
            if not embedding.done():
                if state.get("from_cache"):
                    self._background.add(embedding)
                    embedding.add_done_callback(self._forget)
                else:
                    embedding.cancel()
            elif not embedding.cancelled():
                embedding.exception()  # retrieved, so a failure is not reported twice
        trace.search += found.timing_ms
        candidates = found.candidates
        dry: _DryRun | None = state["dry"]
        if dry is None:
            SEARCH_PLANS.labels(found.plan).inc()
        else:
            vector_used = embedding.result() if not embedding.cancelled() else None
            dry.inputs = (text, vector_used, kb_ids, chunk_total, held)
        prompt = state["prompt"]
        model = self.answerer_name(prompt)
        state["chunks"] = [
            {
                "chunk_id": c.chunk_id,
                "score": round(c.score, 5),
                "vector_rank": c.vector_rank,
                "text_rank": c.text_rank,
            }
            for c in candidates
        ]
        question_vector = embedding.result() if not embedding.cancelled() else None
        evidence: ExtractiveAnswer | None = None
        if self.sentences is not None and question_vector is not None and candidates:
            evidence = await self._evidence(question, question_vector, candidates, trace)
            chosen = candidates[evidence.passage_index] if evidence is not None else None
            confidence, parts = calibrated_confidence(evidence, chosen.vector_rank if chosen else None)
            threshold = self.settings.min_answer_confidence
        else:
            confidence, parts = self.confidence(question, candidates)
            threshold = self.settings.min_confidence
        if state["debug"] is not None:
            state["debug"].update(
                plan=found.plan,
                embedded=found.embedded,
                candidates=[_debug_candidate(c) for c in candidates],
                confidence=parts,
            )
        if candidates:
            state["found"] = (candidates, confidence)
            state["evidence"] = evidence
        if not candidates or confidence < threshold:
            return self._reply("not_found", prompt.not_found_reply, confidence, [])
        if self.llm is None or (dry is not None and dry.skip_model):
            if evidence is not None:
                return self._answered(evidence.text, confidence, candidates, evidence.passages)
            return self._extractive(question, candidates, confidence, prompt)
        return await self._generate(question, candidates, confidence, prompt, model, trace, state)

    async def _evidence(
        self, question: str, vector: Sequence[float], candidates: list[Candidate], trace: _Trace
    ) -> ExtractiveAnswer | None:
        """The sentence of the top passages that best answers the question, by meaning."""
        assert self.sentences is not None
        top = candidates[:_ANSWER_PASSAGES]
        texts = [t for c in top for t in texts_to_embed(c.text, c.section, c.title)]
        t = time.perf_counter()
        vectors = await self.sentences.lookup(self.engine, texts)
        trace.search += (time.perf_counter() - t) * 1000
        question_vector = np.asarray(vector, dtype=np.float32)
        passages = [Passage(text=c.text, title=c.title, score=c.score, section=c.section) for c in top]
        return extractive_answer(
            question,
            passages,
            max_words=self.settings.max_answer_words,
            semantics=Semantics(question=question_vector[None, :], sentences=vectors),
        )

    def _early_reply(self, ctx: Any, state: dict[str, Any]) -> dict[str, Any] | None:
        """From the agent's context row: the reply when no retrieval is needed (nothing to
        search, or a cached answer), None to go on; raises NotFound for an unknown agent."""
        state["cache_key"] = ctx["cache_key"]
        state["escalation"] = (ctx["on_not_found"], ctx["topics"])
        state["attribution"] = ctx["attribution"]
        prompt = state["prompt"] = self.prompts.get_or_default(ctx["variant"])
        if not ctx["kb_ids"] and not ctx["known"]:
            # An agent becomes known to an organisation when a KB of it is first assigned
            # to it: never, and the agent is unknown here (another organisation's included).
            raise NotFound(AGENT_NOT_FOUND)
        require_known_keys(attribute_keys(state["filters"]), ctx["known_keys"])
        state["hidden"] = ctx["hidden_documents"]
        state["filters_applied"] = applied(state["filters"], ctx["agent_clauses"], state["hidden"])
        if state["debug"] is not None:
            state["debug"]["filters"] = state["filters_applied"]
        if ctx["chunk_total"] == 0:
            # Nothing assigned any more, or nothing ready yet: a spoken "I don't know".
            return self._reply("not_found", prompt.not_found_reply, 0.0, [])
        if ctx["cached"] is None or state["debug"] is not None:
            return None
        # SQLAlchemy's asyncpg set-up decodes jsonb on its pooled connections.
        raw = ctx["cached"]
        cached: dict[str, Any] = dict(raw) if isinstance(raw, dict) else json.loads(raw)
        cached["cached"] = True
        cached.setdefault("used_sources", [])
        state["from_cache"] = True
        return cached

    def _reuse(
        self, normalised: str, vector: Sequence[float] | None, state: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The answer of a paraphrase answered before in the call's scope (semantic_cache.py)."""
        if vector is None or not self.semantic_cache.enabled:
            return None
        match = self.semantic_cache.lookup(state["scope"], normalised, vector)
        if match is None:
            return None
        state["from_cache"] = True
        state["semantic_match"] = match
        if state["debug"] is not None:
            state["debug"]["semantic_cache"] = match.debug()
        return {**match.reply, "cached": True}

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

    async def _fuse(
        self,
        conn: Any,
        text: TextHits,
        vector: Sequence[float] | None,
        kb_ids: list[uuid.UUID],
        chunk_total: int,
        hidden: Sequence[uuid.UUID],
        top_k: int | None = None,
    ) -> Retrieval:
        return await self.retriever.fuse(
            conn,
            text=text,
            vector=vector,
            kb_ids=kb_ids,
            model_key=self.embedder.model_key,
            chunk_total=chunk_total,
            candidates=self.settings.candidates,
            top_k=top_k or self.settings.top_k,
            hidden=hidden,
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
                found = set(lexical_terms(f"{c.title} {c.section or ''} {c.text}"))
                coverage = max(coverage, len(terms & found) / len(terms))
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

    def _extractive(
        self,
        question: str,
        candidates: list[Candidate],
        confidence: float,
        prompt: PromptSet,
    ) -> dict[str, Any]:
        passages = [Passage(text=c.text, title=c.title, score=c.score) for c in candidates[:3]]
        result = extractive_answer(question, passages, max_words=self.settings.max_answer_words)
        if result is None or result.support < self.settings.min_support:
            return self._reply("not_found", prompt.not_found_reply, confidence, [])
        return self._answered(result.text, confidence, candidates, result.passages)

    async def _generate(
        self,
        question: str,
        candidates: list[Candidate],
        confidence: float,
        prompt: PromptSet,
        model: str,
        trace: _Trace,
        state: dict[str, Any],
    ) -> dict[str, Any]:
        assert self.llm is not None
        messages = self.model_messages(
            question, candidates, prompt, attribution=state.get("attribution") == "spoken"
        )
        if state["debug"] is not None:
            state["debug"]["messages"] = messages
            state["debug"]["model"] = model
        elapsed = time.perf_counter() - trace.t0
        # Keep a slice of the deadline for the fallback answer and the response itself.
        budget = self.settings.deadline_s - elapsed - 0.1
        speaker: Speaker | None = state["speaker"]
        # A topic the agent hands over replaces this answer by the transfer line: none of it is spoken.
        answer: Callable[..., Awaitable[LLMResult]]
        if (
            speaker is not None
            and matched_topic(question, (state.get("escalation") or ("say", []))[1]) is None
        ):
            answer = partial(speaker.speak, self.llm, prompt.holding_reply)
        else:
            answer = self.llm.complete
        t = time.perf_counter()
        try:
            result = await answer(
                messages,
                model=model,
                temperature=prompt.model.temperature,
                max_tokens=prompt.model.max_tokens or self.settings.llm_max_tokens,
                timeout=budget,
            )
        except LLMError as exc:
            PROVIDER_ERRORS.labels("chat").inc()
            log.warning("answering model failed (%s); answering from the top chunk", exc.reason)
            state["llm_error"] = exc.reason
            if state["debug"] is not None:
                state["debug"]["llm_error"] = exc.reason
            return self._fallback(question, candidates, confidence, prompt, state.get("evidence"))
        finally:
            trace.llm += (time.perf_counter() - t) * 1000
        state["tokens"] = {"prompt": result.prompt_tokens, "completion": result.completion_tokens}
        if state["debug"] is not None:
            state["debug"]["tokens"] = state["tokens"]
        text = result.text.strip()
        if NOT_FOUND_MARK in text or not text:
            return self._reply("not_found", prompt.not_found_reply, confidence, [])
        said = make_speakable(strip_citations(text), max_words=self.settings.max_answer_words)
        if not said:  # nothing speakable came back (emoji, bare markup)
            return self._reply("not_found", prompt.not_found_reply, confidence, [])
        # Which chunks the model drew on is inferred from the words its answer shares with
        # them (app/answering/attribution.py): the model is asked for no citation.
        used = used_passages(text, question, [f"{c.title}\n{c.section or ''}\n{c.text}" for c in candidates])
        return self._answered(said, confidence, candidates, used)

    def _fallback(
        self,
        question: str,
        candidates: list[Candidate],
        confidence: float,
        prompt: PromptSet,
        evidence: ExtractiveAnswer | None,
    ) -> dict[str, Any]:
        """The answering model failed or ran out of time: read out the sentence chosen by
        meaning (the offline default), else the best sentence of the top chunk by words."""
        if evidence is not None:
            reply = self._answered(evidence.text, confidence, candidates, evidence.passages)
            reply["degraded"] = True
            return reply
        top = candidates[0]
        result = extractive_answer(
            question,
            [Passage(text=top.text, title=top.title, score=top.score)],
            max_words=self.settings.max_answer_words,
        )
        text = result.text if result else make_speakable(top.text, max_words=self.settings.max_answer_words)
        reply = self._answered(text or prompt.unavailable_reply, confidence, candidates, (0,))
        reply["degraded"] = True
        return reply

    @staticmethod
    def _escalate(response: dict[str, Any], question: str, prompt: PromptSet, state: dict[str, Any]) -> None:
        """Set the reply's ``action`` by the agent's escalation policy (README): a topic the
        question names, or not_found under ``transfer``, replaces the answer by the
        transfer line, which rests on no chunk. Before the agent's context is read (an
        early failure) no policy is known: the reply is spoken as it is."""
        on_not_found, topics = state.get("escalation") or ("say", [])
        topic = matched_topic(question, topics)
        if topic is not None:
            reason: str | None = f"topic:{topic}"
        elif response["status"] == "not_found" and on_not_found == "transfer":
            reason = "not_found"
        else:
            reason = None
        if reason is None:
            response.update(action=_ACTIONS[response["status"]], transfer_reason=None)
        else:
            response.update(
                answer=prompt.transfer_reply,
                sources=[],
                used_sources=[],
                action="transfer",
                transfer_reason=reason,
            )
        if state["debug"] is not None:
            state["debug"]["escalation"] = {
                "on_not_found": on_not_found,
                "topics": list(topics),
                "matched_topic": topic,
                "knowledge_reply": state["knowledge_reply"] if reason is not None else None,
            }

    @staticmethod
    def _reply(status: str, answer: str, confidence: float, sources: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "answer": answer,
            "status": status,
            "confidence": confidence,
            "sources": sources,
            "used_sources": [],
            "cached": False,
            "degraded": False,
        }

    def _answered(
        self, text: str, confidence: float, candidates: Sequence[Candidate], used: Sequence[int]
    ) -> dict[str, Any]:
        """An answered reply read from the candidates at ``used``: its ``used_sources`` are
        their chunk ids, and its ``sources`` list them first."""
        reply = self._reply("answered", text, confidence, answer_sources(candidates, used))
        reply["used_sources"] = [candidates[i].chunk_id for i in dict.fromkeys(used)]
        return reply

    def _attribute(self, response: dict[str, Any], prompt: PromptSet, state: dict[str, Any]) -> None:
        """For an agent whose answers name their source: an answer cut from the passages (no
        model, or the model failed) is led by the phrase of ``reply.attribution.md`` with the
        speakable title of the document its first sentence came from; none when that title
        has nothing speakable. A model's answer names its source itself (grounding.attribution.md).
        A cached answer already carries its phrase; not_found and unavailable name nothing."""
        spoken = state.get("attribution") == "spoken"
        title = None
        read_out = self.llm is None or response["degraded"]
        # The fallback's apology (a top chunk with nothing speakable) is no answer to attribute.
        fresh = response["status"] == "answered" and not response["cached"]
        if spoken and read_out and fresh and response["answer"] != prompt.unavailable_reply:
            candidates = state["found"][0] if state.get("found") else []
            titles = {c.chunk_id: c.title for c in candidates}
            first = response["used_sources"][0] if response["used_sources"] else None
            title = speakable_title(titles.get(first)) if first is not None else None
            if title is not None:
                phrase = prompt.attributed(title=title, answer="")
                response["answer"] = make_speakable(
                    prompt.attributed(title=title, answer=lower_first(response["answer"])),
                    max_words=self.settings.max_answer_words + len(phrase.split()),
                )
        if state["debug"] is not None:
            used_from = None
            if fresh:
                used_from = "the sentences read out" if read_out else "overlap with the model's answer"
            state["debug"]["attribution"] = {
                "mode": state.get("attribution", "off"),
                "spoken_title": title,
                "used_sources_from": used_from,
            }

    async def _finish(
        self,
        org_id: uuid.UUID,
        agent_id: uuid.UUID,
        question: str,
        normalised: str,
        prompt: PromptSet,
        model: str,
        response: dict[str, Any],
        state: dict[str, Any],
        *,
        evaluation: bool,
    ) -> None:
        """After the response is sent: store the answer in the cache and log the call."""
        cacheable = (
            response["status"] in ("answered", "not_found")
            and not response["degraded"]
            and not response["cached"]
            and state["cache_key"] is not None
            and self.settings.answer_cache_ttl_s > 0
        )
        stored = json.dumps(state["knowledge_reply"]) if cacheable else None
        standalone: Standalone = state["standalone"]
        match = state.get("semantic_match")
        # A paraphrase may reuse only what the knowledge answered, in full, and spoken as it
        # was: never not_found, a degraded answer or a transfer (semantic_cache.py).
        if (
            cacheable
            and response["status"] == "answered"
            and response["action"] == "answer"
            and self.semantic_cache.enabled
            and state.get("scope") is not None
            and (vector := self.embed_cache.get((self.embedder.model_key, normalised))) is not None
        ):
            self.semantic_cache.store(
                state["scope"],
                normalised,
                vector,
                query_id=uuid.UUID(response["query_id"]),
                reply=state["knowledge_reply"],
            )
        try:
            async with raw_connection(self.engine) as conn:
                await conn.execute(
                    sql.FINISH_SQL,
                    uuid.UUID(response["query_id"]),
                    org_id,
                    agent_id,
                    question,
                    normalised,
                    response["status"],
                    response["confidence"],
                    json.dumps(state["chunks"]),
                    response["answer"],
                    prompt.variant,
                    prompt.version,
                    model,
                    json.dumps(response["timings_ms"]),
                    response["cached"],
                    response["degraded"],
                    state["cache_key"] if cacheable else None,
                    stored,
                    self.settings.answer_cache_ttl_s,
                    evaluation,
                    response["action"],
                    response["transfer_reason"],
                    standalone.question if standalone.method != "none" else None,
                    standalone.method,
                    response["used_sources"],
                    match.question if match else None,
                    match.similarity if match else None,
                    match.query_id if match else None,
                    json.dumps(state["filters_applied"]) if state["filters_applied"] else None,
                )
        except Exception:
            log.warning("could not record query %s", response.get("query_id"), exc_info=True)


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
        "text_rank": c.text_rank,
        "similarity": c.similarity,
        "text_score": c.text_score,
        "text": c.text,
    }
