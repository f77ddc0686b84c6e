"""Replay an agent's logged questions with another prompt variant and report what changed.

Questions come from the service's query log (newest first, callers' calls only) and are
asked again in debug mode, so the answer cache cannot hand back the logged answer. The
replayed calls are sent as evaluation traffic (``X-Evaluation: true``): logged as such, they
stay out of the knowledge gaps and out of the next replay.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from app.answering.speech import speech_problems
from app.evaluation.dataset import Question
from app.evaluation.metrics import model_costs, normalise_space, tokens_by_model
from app.evaluation.progress import Progress
from app.evaluation.report import fmt, latency, md_table
from app.evaluation.runner import grade
from app.evaluation.service_client import ServiceClient
from app.query.service import normalise_question

__all__ = ["ReplayRow", "fetch_logged", "replay", "replay_report"]

# Changed questions listed per kind in report.md; report.json keeps every row.
_LISTED = 100


@dataclass(slots=True)
class ReplayRow:
    """A logged call and the same question asked again with the chosen variant."""

    log_id: str
    query: str
    logged_at: str
    logged_status: str
    logged_answer: str
    logged_confidence: float
    logged_variant: str | None
    logged_version: str | None
    logged_model: str | None
    variant: str
    http_status: int
    status: str
    answer: str
    confidence: float
    error: str | None = None
    degraded: bool = False
    timings_ms: dict[str, float] = field(default_factory=dict)
    client_ms: float = 0.0
    speech_problems: list[str] = field(default_factory=list)
    logged_speech_problems: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embedding_tokens: int = 0
    model: str | None = None

    @property
    def changed_status(self) -> bool:
        return self.status != self.logged_status

    @property
    def changed_answer(self) -> bool:
        return normalise_space(self.answer) != normalise_space(self.logged_answer)


async def fetch_logged(client: ServiceClient, agent_id: str, last: int) -> tuple[list[dict[str, Any]], int]:
    """The agent's last ``last`` logged calls, one per distinct question (newest kept).

    Callers repeat themselves and repeats get the same reply, so each distinct question
    (compared as the service normalises it) is replayed once. Returns the entries and
    how many calls were read from the log.
    """
    logged = await client.query_log(agent_id, last)
    unique: dict[str, dict[str, Any]] = {}
    for entry in logged:
        unique.setdefault(normalise_question(entry["query"]), entry)
    return list(unique.values()), len(logged)


async def replay(
    client: ServiceClient,
    agent_id: str,
    entries: Sequence[dict[str, Any]],
    variant: str,
    *,
    concurrency: int = 1,
    progress: Progress | None = None,
) -> list[ReplayRow]:
    """Ask every logged question again with ``variant``; rows in the entries' order."""
    jobs: deque[int] = deque(range(len(entries)))
    rows: list[ReplayRow | None] = [None] * len(entries)

    async def work() -> None:
        while jobs:
            i = jobs.popleft()
            entry = entries[i]
            question = Question(
                id=str(entry["id"]), question=entry["query"], answers=(), doc="", paragraph_index=0
            )
            reply = await client.query(agent_id, entry["query"], variant=variant)
            graded = grade(question, variant, reply, None)
            logged_answered = entry["status"] == "answered"
            rows[i] = ReplayRow(
                log_id=str(entry["id"]),
                query=entry["query"],
                logged_at=str(entry["created_at"]),
                logged_status=entry["status"],
                logged_answer=entry["answer"],
                logged_confidence=entry["confidence"],
                logged_variant=entry.get("prompt_variant"),
                logged_version=entry.get("prompt_version"),
                logged_model=entry.get("model"),
                variant=variant,
                http_status=graded.http_status,
                status=graded.status,
                answer=graded.answer,
                confidence=graded.confidence,
                error=graded.error,
                degraded=graded.degraded,
                timings_ms=graded.timings_ms,
                client_ms=graded.client_ms,
                speech_problems=graded.speech_problems,
                logged_speech_problems=speech_problems(entry["answer"]) if logged_answered else [],
                prompt_tokens=graded.prompt_tokens,
                completion_tokens=graded.completion_tokens,
                embedding_tokens=graded.embedding_tokens,
                model=graded.model,
            )
            if progress is not None:
                progress.advance()

    await asyncio.gather(*(work() for _ in range(max(1, concurrency))))
    return [row for row in rows if row is not None]


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _summary(rows: Sequence[ReplayRow], read: int) -> dict[str, Any]:
    n = len(rows)
    before_answered = [r for r in rows if r.logged_status == "answered"]
    after_answered = [r for r in rows if r.status == "answered"]
    calls = n or 1
    prompt = sum(r.prompt_tokens for r in rows)
    completion = sum(r.completion_tokens for r in rows)
    embedding = sum(r.embedding_tokens for r in rows)
    by_model = tokens_by_model(((r.model, r.prompt_tokens, r.completion_tokens) for r in rows), calls)
    cost = model_costs(by_model, embedding / calls)
    return {
        "logged_calls_read": read,
        "questions_replayed": n,
        "http_errors": sum(r.http_status != 200 for r in rows),
        "changed_status": sum(r.changed_status for r in rows),
        "changed_answer": sum(r.changed_answer for r in rows),
        "transitions": {
            f"{a} -> {b}": count
            for (a, b), count in sorted(Counter((r.logged_status, r.status) for r in rows).items())
        },
        "logged": {
            "answered_share": _share(len(before_answered), n),
            "not_found_share": _share(sum(r.logged_status == "not_found" for r in rows), n),
            "speakable_share": _share(
                sum(not r.logged_speech_problems for r in before_answered), len(before_answered)
            ),
        },
        "replayed": {
            "answered_share": _share(len(after_answered), n),
            "not_found_share": _share(sum(r.status == "not_found" for r in rows), n),
            "speakable_share": _share(
                sum(not r.speech_problems for r in after_answered), len(after_answered)
            ),
        },
        "latency_ms": {
            "service_total": latency([r.timings_ms["total"] for r in rows if "total" in r.timings_ms]),
            "client_round_trip": latency([r.client_ms for r in rows]),
        },
        "tokens": {
            "prompt_total": prompt,
            "completion_total": completion,
            "embedding_total_estimated": embedding,
        },
        "cost_per_1000_calls_usd": {
            key: None if value is None else round(value, 6) for key, value in cost.items()
        },
    }


def replay_report(config: dict[str, Any], rows: Sequence[ReplayRow], read: int) -> tuple[dict[str, Any], str]:
    """report.json content and report.md text of a replay."""
    summary = _summary(rows, read)
    document = {
        "kind": "replay",
        "config": config,
        "metrics": summary,
        "rows": [
            {**asdict(r), "changed_status": r.changed_status, "changed_answer": r.changed_answer}
            for r in rows
        ],
    }
    variant = config.get("variant")
    lines = [f"# Replay with variant `{variant}`", ""]
    lines += [f"- {key}: `{value}`" for key, value in config.items() if value not in (None, "")]
    lines += [
        "",
        f"{read} logged calls read, {len(rows)} distinct questions replayed; "
        f"{summary['changed_status']} changed status, {summary['changed_answer']} changed answer text.",
        "",
    ]
    headline = [
        ("Answered", "answered_share"),
        ("not_found", "not_found_share"),
        ("Speakable answers", "speakable_share"),
    ]
    lines += md_table(
        ["metric", "logged", "replayed"],
        [
            [label, fmt(summary["logged"][key], "share"), fmt(summary["replayed"][key], "share")]
            for label, key in headline
        ]
        + [
            ["Service time p50 / p99 (ms)", "", _pair(summary["latency_ms"]["service_total"])],
            ["Round trip p50 / p99 (ms)", "", _pair(summary["latency_ms"]["client_round_trip"])],
            ["Cost per 1,000 calls (USD)", "", fmt(summary["cost_per_1000_calls_usd"]["total"], "usd")],
        ],
    )
    lines += ["", "## Status transitions (logged -> replayed)", ""]
    lines += md_table(["transition", "questions"], list(summary["transitions"].items()))
    status_changed = [r for r in rows if r.changed_status]
    answer_changed = [r for r in rows if r.changed_answer and not r.changed_status]
    for title, picked in (
        ("Status changed", status_changed),
        ("Same status, answer changed", answer_changed),
    ):
        lines += ["", f"## {title} ({len(picked)})", ""]
        if not picked:
            lines.append("None.")
            continue
        if len(picked) > _LISTED:
            lines += [f"_The first {_LISTED} are shown; report.json has all._", ""]
        lines += md_table(
            ["logged at", "question", "logged", "logged answer", "replayed", "replayed answer"],
            [
                [r.logged_at, r.query, r.logged_status, r.logged_answer, r.status, r.answer]
                for r in picked[:_LISTED]
            ],
        )
    lines.append("")
    return document, "\n".join(lines)


def _pair(values: dict[str, float | None]) -> str:
    return f"{fmt(values['p50'], 'ms')} / {fmt(values['p99'], 'ms')}"
