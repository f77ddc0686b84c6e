"""Load a question set's documents into the service, ask its questions, grade each reply.

The runner talks to the service only through ``ServiceClient``, so the same code runs
in-process (CLI default, tests) and against a running service.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.answering.speech import speech_problems
from app.evaluation.dataset import Document, Question, group_documents
from app.evaluation.metrics import GoldPassage, best_f1, contains_all_gold, contains_gold, first_gold_rank
from app.evaluation.progress import Progress
from app.evaluation.service_client import QueryReply, ServiceClient, ServiceError
from app.ingestion.chunking import get_encoding
from app.ingestion.extract_markup import extract_markdown
from app.query.service import normalise_question

__all__ = [
    "DocumentRef",
    "Knowledge",
    "Row",
    "RunInterrupted",
    "find_knowledge",
    "grade",
    "load_knowledge",
    "load_organisations",
    "question_tokens",
    "run_questions",
]

# The service's default chunk size (INGESTION__CHUNK_TOKENS), for a knowledge base whose
# size cannot be read.
_DEFAULT_CHUNK_TOKENS = 500
# Enough to read the service's answer cap plus a long gold answer; longer texts are cut in
# the per-question rows so a report of thousands of questions stays readable.
_MAX_KEPT_TEXT = 2000


@dataclass(frozen=True, slots=True)
class DocumentRef:
    """Where a document of the question set lives in the service."""

    document_id: str
    chunk_tokens: int


@dataclass(frozen=True, slots=True)
class Knowledge:
    """The agents to ask, by organisation ("" for a set without organisations), and the
    service's ids of the set's documents (by name)."""

    agents: dict[str, str]
    documents: dict[str, DocumentRef]
    missing: tuple[str, ...] = ()

    @property
    def agent_id(self) -> str:
        """The agent of a set with one knowledge base (squad-dev, remote mode)."""
        if len(self.agents) != 1:
            raise ValueError(f"{len(self.agents)} agents: ask agent_for(question)")
        return next(iter(self.agents.values()))

    def agent_for(self, question: Question) -> str:
        """The agent whose knowledge base holds the question's organisation's documents."""
        return self.agents[question.org or ""]


@dataclass(slots=True)
class Row:
    """One question asked once (with one variant), and how its reply scored.

    ``gold_rank``, ``correct`` and ``f1`` are None for unanswerable questions: they are
    scored by their status alone. ``org`` and ``kind`` are set by callers-dev questions
    only (and left out of report.json when None, so squad-dev rows keep their shape).
    ``confidence_parts`` are the features the reply's confidence came from (``debug.confidence``),
    which bench/calibrate.py refits the confidence from.
    """

    id: str
    question: str
    answers: list[str]
    doc: str | None
    paragraph_index: int | None
    answerable: bool
    variant: str | None
    http_status: int
    error: str | None = None
    status: str = "error"
    answer: str = ""
    confidence: float = 0.0
    cached: bool = False
    degraded: bool = False
    timings_ms: dict[str, float] = field(default_factory=dict)
    client_ms: float = 0.0
    gold_rank: int | None = None
    correct: bool | None = None
    f1: float | None = None
    speech_problems: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embedding_tokens: int = 0
    model: str | None = None
    llm_error: str | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)
    org: str | None = None
    kind: str | None = None
    confidence_parts: dict[str, float] | None = None

    @property
    def right(self) -> bool:
        """The reply the question calls for: an answer with the gold when it is
        answerable, ``not_found`` when it is not."""
        if self.answerable:
            return self.status == "answered" and bool(self.correct)
        return self.status == "not_found"


def question_tokens(question: str) -> int:
    """Tokens the service would send to the embedding model for this question.

    The service embeds the normalised question (NFKC, case-folded); cl100k_base is the
    tokenizer of OpenAI's text-embedding-3 models.
    """
    return len(get_encoding("cl100k_base").encode_ordinary(normalise_question(question)))


async def load_knowledge(
    client: ServiceClient,
    documents: Mapping[str, Document],
    *,
    title: str = "Evaluation",
    org: str = "",
    wait: Callable[[], Awaitable[object]] | None = None,
    poll_interval_s: float = 0.5,
    timeout_s: float = 1800.0,
) -> Knowledge:
    """One knowledge base with every document, assigned to a fresh agent, once all are ready.

    The agent is ``org``'s in the returned ``Knowledge``. ``wait`` runs before each look
    at the documents' status; tests pass a function that drains the ingestion queue, the
    CLI relies on the service's own workers.
    """
    kb = await client.create_knowledge_base(title, "Documents of an evaluation question set.")
    ids: dict[str, str] = {}
    for name, document in documents.items():
        # A callers-dev name carries its organisation's folder, which is no part of a file name.
        created = await client.upload(
            kb["id"], Path(document.filename).name, document.data, document.title, document.media_type
        )
        ids[name] = created["id"]
    agent_id = str(uuid.uuid4())
    await client.assign_agents(kb["id"], [agent_id])
    deadline = time.monotonic() + timeout_s
    while True:
        if wait is not None:
            await wait()
        detail = await client.knowledge_base(kb["id"])
        statuses = {d["id"]: d["status"] for d in detail["documents"]}
        failed = sorted(name for name, doc_id in ids.items() if statuses.get(doc_id) == "failed")
        if failed:
            raise ServiceError(f"ingestion failed for: {', '.join(failed)}")
        if all(statuses.get(doc_id) == "ready" for doc_id in ids.values()):
            break
        if time.monotonic() > deadline:
            raise ServiceError(f"documents not ready after {timeout_s:.0f} s")
        await asyncio.sleep(poll_interval_s)
    chunk_tokens = int(detail.get("chunk_tokens") or _DEFAULT_CHUNK_TOKENS)
    return Knowledge(
        {org: agent_id}, {name: DocumentRef(doc_id, chunk_tokens) for name, doc_id in ids.items()}
    )


async def load_organisations(
    client: ServiceClient,
    documents: Mapping[str, Document],
    *,
    wait: Callable[[], Awaitable[object]] | None = None,
) -> Knowledge:
    """One knowledge base and one agent per organisation of the set (``group_documents``),
    as a voice platform would hold them; a set without organisations gets one of each.

    Organisations are loaded one after the other: ``wait`` (the tests' queue drain) must
    not run twice at once.
    """
    agents: dict[str, str] = {}
    refs: dict[str, DocumentRef] = {}
    for org, group in group_documents(documents).items():
        title = f"Evaluation: {org}" if org else "Evaluation"
        loaded = await load_knowledge(client, group, title=title, org=org, wait=wait)
        agents.update(loaded.agents)
        refs.update(loaded.documents)
    return Knowledge(agents, refs)


async def find_knowledge(
    client: ServiceClient, agent_id: str, documents: Mapping[str, Document]
) -> Knowledge:
    """Find the set's documents among the agent's knowledge bases (remote mode).

    A document matches by title: its ``# Title`` line (what ``vk eval`` uploads), its file
    name, or its file name without ``.md`` (the service's default title for an upload).
    Documents not found are listed in ``missing``; their questions can never score a
    retrieval hit, and the report says so.
    """
    found: dict[str, DocumentRef] = {}
    by_title: dict[str, DocumentRef] = {}
    for kb in await client.agent_knowledge(agent_id):
        detail = await client.knowledge_base(kb["id"])
        chunk_tokens = int(detail.get("chunk_tokens") or _DEFAULT_CHUNK_TOKENS)
        for doc in detail["documents"]:
            if doc["status"] == "ready":
                by_title.setdefault(doc["title"], DocumentRef(doc["id"], chunk_tokens))
    for name, document in documents.items():
        for title in (document.title, name, Path(name).stem):
            if title in by_title:
                found[name] = by_title[title]
                break
    missing = tuple(sorted(set(documents) - set(found)))
    return Knowledge({"": agent_id}, found, missing)


def _as_extracted(paragraph: str) -> str:
    """A markdown paragraph as the service's extraction renders it into chunk text.

    callers-dev paragraphs start with ``## heading`` lines and hold tables: extraction
    makes a heading the section's title (kept out of the chunk text) and a table
    comma-separated rows, so the paragraph as written is never inside a chunk.
    """
    sections = extract_markdown(paragraph.encode("utf-8")).sections
    return "\n\n".join(section.text for section in sections) or paragraph


def _gold_passages(
    questions: Sequence[Question], documents: Mapping[str, Document], knowledge: Knowledge
) -> dict[str, GoldPassage]:
    encoding = get_encoding("cl100k_base")
    passages: dict[str, GoldPassage] = {}
    for question in questions:
        if not question.answerable or question.doc is None or question.paragraph_index is None:
            continue
        paragraph = documents[question.doc].paragraphs[question.paragraph_index]
        if question.org is not None:
            # squad-dev's plain paragraphs are compared as written, as they always were.
            paragraph = _as_extracted(paragraph)
        ref = knowledge.documents.get(question.doc)
        passages[question.id] = GoldPassage.build(
            ref.document_id if ref else None,
            paragraph,
            question.answers,
            # The chunker sizes a paragraph by encoding it on its own, as here.
            paragraph_tokens=len(encoding.encode_ordinary(paragraph)),
            chunk_tokens=ref.chunk_tokens if ref else _DEFAULT_CHUNK_TOKENS,
        )
    return passages


def grade(
    question: Question,
    variant: str | None,
    reply: QueryReply,
    gold: GoldPassage | None,
    *,
    max_words: int = 60,
) -> Row:
    """Turn one reply into a scored row."""
    row = Row(
        id=question.id,
        question=question.question,
        answers=list(question.answers),
        doc=question.doc,
        paragraph_index=question.paragraph_index,
        answerable=question.answerable,
        variant=variant,
        http_status=reply.http_status,
        client_ms=round(reply.client_ms, 2),
        embedding_tokens=question_tokens(question.question),
        org=question.org,
        kind=question.kind,
    )
    body = reply.body
    if reply.http_status != 200:
        row.error = f"{body.get('error', 'http_error')}: {body.get('detail', '')}"[:_MAX_KEPT_TEXT]
        if question.answerable:
            row.correct, row.f1 = False, 0.0
        return row
    debug: dict[str, Any] = body.get("debug") or {}
    row.status = body["status"]
    row.answer = body["answer"][:_MAX_KEPT_TEXT]
    row.confidence = body["confidence"]
    row.cached = body["cached"]
    row.degraded = body["degraded"]
    row.timings_ms = body["timings_ms"]
    row.model = debug.get("model")
    row.llm_error = debug.get("llm_error")
    row.confidence_parts = debug.get("confidence")
    tokens = debug.get("tokens") or {}
    row.prompt_tokens = int(tokens.get("prompt") or 0)
    row.completion_tokens = int(tokens.get("completion") or 0)
    if row.status == "answered":
        read = [candidate.get("text") or "" for candidate in debug.get("candidates") or []]
        row.speech_problems = speech_problems(body["answer"], max_words=max_words, read=read)
    flags: list[bool] = []
    for rank, candidate in enumerate(debug.get("candidates") or [], start=1):
        is_gold = gold is not None and gold.matches(candidate["document_id"], candidate.get("text") or "")
        flags.append(is_gold)
        row.candidates.append(
            {
                "rank": rank,
                "document_id": candidate["document_id"],
                "title": candidate["title"],
                "chunk_id": candidate["chunk_id"],
                "score": candidate["score"],
                "vector_rank": candidate.get("vector_rank"),
                "text_rank": candidate.get("text_rank"),
                "gold": is_gold,
            }
        )
    if question.answerable:
        row.gold_rank = first_gold_rank(flags)
        answered = row.status == "answered"
        # A not_found or unavailable reply is a wrong answer, whatever its wording.
        contains = contains_all_gold if question.needs_all_answers else contains_gold
        row.correct = answered and contains(body["answer"], question.answers)
        row.f1 = round(best_f1(body["answer"], question.answers), 4) if answered else 0.0
    return row


async def run_questions(
    client: ServiceClient,
    knowledge: Knowledge,
    questions: Sequence[Question],
    documents: Mapping[str, Document],
    variants: Sequence[str | None] = (None,),
    *,
    concurrency: int = 1,
    progress: Progress | None = None,
) -> list[list[Row]]:
    """Ask every question once per variant; one list of rows per variant, in question order.

    With several variants the calls are interleaved question by question, and the order
    of the variants alternates, so neither variant profits more from warm caches (query
    embeddings, database pages) or suffers more from a busy moment.
    """
    gold = _gold_passages(questions, documents, knowledge)
    jobs: deque[tuple[int, int]] = deque()
    for i in range(len(questions)):
        order = range(len(variants)) if i % 2 == 0 else range(len(variants) - 1, -1, -1)
        jobs.extend((i, v) for v in order)
    results: list[list[Row | None]] = [[None] * len(questions) for _ in variants]

    async def work() -> None:
        while jobs:
            i, v = jobs.popleft()
            question = questions[i]
            agent_id = knowledge.agent_for(question)
            reply = await client.query(
                agent_id, question.question, variant=variants[v], history=question.history
            )
            results[v][i] = grade(question, variants[v], reply, gold.get(question.id))
            if progress is not None:
                progress.advance()

    try:
        await asyncio.gather(*(work() for _ in range(max(1, concurrency))))
    except asyncio.CancelledError:
        # Ctrl-C (asyncio.run cancels the run): the questions every variant has answered are
        # kept, so that a long run stopped part way still gives its report.
        done = [i for i in range(len(questions)) if all(rows[i] is not None for rows in results)]
        kept = [[row for i in done if (row := rows[i]) is not None] for rows in results]
        raise RunInterrupted(kept) from None
    return [[row for row in rows if row is not None] for rows in results]


class RunInterrupted(Exception):
    """The run was cancelled; ``rows`` holds, per variant, the questions every variant answered."""

    def __init__(self, rows: list[list[Row]]) -> None:
        super().__init__("interrupted")
        self.rows = rows
