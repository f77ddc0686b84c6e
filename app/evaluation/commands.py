"""What ``vk eval`` and ``vk replay`` do; ``app/cli.py`` only declares their options.

``evaluate`` is the reusable core: given any ``ServiceClient`` (an in-process test client,
a running service), it loads or finds the knowledge, asks the questions and returns the
rows, which ``build_report`` turns into the two report files. Both question formats of
``app.evaluation.dataset`` run through it: a callers-dev set gets one knowledge base and
one agent per organisation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import httpx
import typer

from app.config import Settings
from app.evaluation.dataset import (
    DatasetError,
    Document,
    Question,
    as_plain_text,
    load_question_set,
)
from app.evaluation.inprocess import embedded_postgres, evaluation_settings, in_process_service
from app.evaluation.progress import Progress
from app.evaluation.replay import fetch_logged, replay, replay_report
from app.evaluation.report import (
    HEADLINE,
    compare_report,
    eval_report,
    fmt,
    kind_table,
    machine,
    metric,
    reliability_table,
    write_report,
)
from app.evaluation.runner import (
    Knowledge,
    Row,
    RunInterrupted,
    find_knowledge,
    load_organisations,
    run_questions,
)
from app.evaluation.service_client import ServiceClient, ServiceError
from app.prompting import PromptError, PromptLibrary
from app.query.tool_service import load_prompts

__all__ = ["Evaluation", "build_report", "eval_command", "evaluate", "replay_command", "replay_with"]

_REMOTE_TIMEOUT_S = 30.0
# Figures echoed on stdout after a run; report.md has the rest.
_ECHOED = (
    "Retrieval hit@1",
    "Retrieval hit@5",
    "Retrieval MRR@10",
    "Served by semantic cache (no retrieval)",
    "Answer contains gold",
    "Token F1 (mean)",
    "not_found precision",
    "not_found recall",
    "Answerable refused (not_found)",
    "Unanswerable → not_found",
    "Precision of answers, confidence ≥ 0.9",
    "Wrong answers, confidence ≥ 0.9",
    "Answers right (count)",
    "Answers wrong (count)",
    "Model answers not used (degraded)",
    "Speakable answers",
    "Service time p50 (ms)",
    "Service time p99 (ms)",
)


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The knowledge asked and one list of rows per variant, in question order."""

    knowledge: Knowledge
    variants: list[str | None]
    rows: list[list[Row]]


async def evaluate(
    client: ServiceClient,
    questions: Sequence[Question],
    documents: Mapping[str, Document],
    *,
    variants: Sequence[str | None] = (None,),
    agent_id: str | None = None,
    wait: Callable[[], Awaitable[object]] | None = None,
    concurrency: int = 1,
    show_progress: bool = False,
) -> Evaluation:
    """Ask ``questions`` once per variant.

    Without ``agent_id`` the documents are uploaded into new knowledge bases, one per
    organisation, each for a fresh agent (``wait`` as in ``load_knowledge``); with it, they
    are looked up among that agent's knowledge bases (a set without organisations only).
    """
    if agent_id is None:
        if show_progress:
            typer.echo(f"loading {len(documents)} documents and waiting until they are ready", err=True)
        knowledge = await load_organisations(client, documents, wait=wait)
    else:
        knowledge = await find_knowledge(client, agent_id, documents)
        if knowledge.missing:
            typer.echo(f"warning: not in the agent's knowledge: {', '.join(knowledge.missing)}", err=True)
    progress = Progress(len(questions) * len(variants), "asking", enabled=show_progress)
    try:
        rows = await run_questions(
            client, knowledge, questions, documents, variants, concurrency=concurrency, progress=progress
        )
    except RunInterrupted as exc:
        raise EvaluationInterrupted(Evaluation(knowledge, list(variants), exc.rows)) from None
    finally:
        progress.close()
    return Evaluation(knowledge, list(variants), rows)


def prompts_config(prompts: PromptLibrary, directory: Path) -> dict[str, Any]:
    """Which prompt text made a report's figures: each variant's version, and the fingerprint
    of every file's text (an edit without a new version shows too)."""
    return {
        "dir": str(directory),
        "fingerprint": prompts.fingerprint,
        "versions": {name: prompts.get(name).version for name in prompts.variants},
    }


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI job's timeout, ``kill``) stops a run as Ctrl-C does: the questions
    answered so far are reported and the temporary database is stopped. It killed the run
    outright, leaving no report and a PostgreSQL running."""
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class EvaluationInterrupted(Exception):
    """Ctrl-C while the questions were asked: what was answered so far, to report."""

    def __init__(self, evaluation: Evaluation) -> None:
        super().__init__("interrupted")
        self.evaluation = evaluation


def build_report(config: dict[str, Any], evaluation: Evaluation) -> tuple[dict[str, Any], str]:
    """report.json content and report.md text: a comparison when two variants ran."""
    agents = evaluation.knowledge.agents
    config = {
        **config,
        # One agent for a set without organisations, as before; else one per organisation.
        **({"agent_id": agents[""]} if list(agents) == [""] else {"agents": agents}),
        "documents_missing": list(evaluation.knowledge.missing),
        "answerers_seen": sorted(
            {r.model or "extractive" for rows in evaluation.rows for r in rows if r.status == "answered"}
        ),
    }
    if len(evaluation.variants) == 2:
        labels = (_label(evaluation.variants[0]), _label(evaluation.variants[1]))
        return compare_report(config, labels, evaluation.rows[0], evaluation.rows[1])
    return eval_report(config, evaluation.rows[0])


def _label(variant: str | None) -> str:
    return variant if variant is not None else "(agent's variant)"


def _fail(exc: Exception, url: str | None) -> NoReturn:
    if isinstance(exc, httpx.TransportError) and url:
        # httpx says "All connection attempts failed" and nothing of where it tried.
        message = (
            f"cannot reach the service at {url} ({exc or type(exc).__name__}); check that it is "
            "running (vk serve) and that --url has the right scheme, host and port"
        )
    else:
        message = str(exc) or type(exc).__name__
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1) from exc


def _quiet_loggers() -> None:
    # The app's logging set-up lets httpx log every request at INFO, one line per question,
    # and pgserver narrates starting and stopping: both drown the progress bar.
    for name in ("httpx", "pgserver"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _default_out() -> Path:
    stamp = Path("eval-out") / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path, n = stamp, 1
    while path.exists():  # two runs started in the same second
        n += 1
        path = stamp.with_name(f"{stamp.name}-{n}")
    return path


def _writable_out(out: Path | None, *, inside: Path | None = None) -> Path:
    """The report folder, made now: a folder that cannot be written is found before the run,
    not after every question has been asked. A report already there is replaced."""
    out_dir = out or _default_out()
    if inside is not None and out_dir.resolve().is_relative_to(inside.resolve()):
        raise typer.BadParameter(
            f"{out_dir} is inside the documents folder {inside}: its report would be uploaded"
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir):
            pass
    except OSError as exc:
        raise typer.BadParameter(f"cannot write the report into {out_dir}: {exc.strerror or exc}") from None
    return out_dir


def _failed_requests(document: dict[str, Any]) -> int:
    """Requests the service answered with an HTTP error, every variant's: reported, and the
    exit status is 1."""
    summaries = document["metrics"].values() if document["kind"] == "compare" else [document["metrics"]]
    return sum(int(summary["http_errors"]) for summary in summaries)


def _warn_of_errors(document: dict[str, Any], asked: int) -> None:
    failed = _failed_requests(document)
    if failed:
        first = next(row for row in _all_rows(document) if row.get("error"))
        typer.echo(
            f"error: {failed} of {asked} requests failed (first: {first['error']}); "
            "the figures count them as wrong",
            err=True,
        )
        raise typer.Exit(1)


def _all_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for row in document["rows"]:
        if document["kind"] == "compare":
            rows.extend(v for v in row.values() if isinstance(v, dict) and "error" in v)
        else:
            rows.append(row)
    return rows


def _service_settings(settings: Settings) -> dict[str, Any]:
    return {
        "embedder": settings.embedding_provider,
        "answerer": settings.query.llm_model if settings.answerer == "openai" else "extractive",
        "top_k": settings.query.top_k,
        "min_confidence": settings.query.min_confidence,
        "min_support": settings.query.min_support,
        "max_answer_words": settings.query.max_answer_words,
        "deadline_s": settings.query.deadline_s,
        "chunk_tokens": settings.ingestion.chunk_tokens,
        "chunk_overlap_tokens": settings.ingestion.chunk_overlap_tokens,
    }


def eval_command(
    dataset: Path,
    *,
    docs: Path | None,
    url: str | None,
    key: str | None,
    agent: str | None,
    variant: str | None,
    compare: tuple[str, str] | None,
    limit: int | None,
    seed: int,
    out: Path | None,
    concurrency: int,
    docs_as: str = "markdown",
) -> Path:
    """Run ``vk eval``; returns the folder holding report.json and report.md. ``docs_as``
    "text" uploads the documents as plain text (dataset.as_plain_text)."""
    remote = (url, key, agent)
    if any(remote) and not all(remote):
        raise typer.BadParameter("--url, --key and --agent go together (remote mode)")
    if variant is not None and compare is not None:
        raise typer.BadParameter("use --variant or --compare, not both")
    if compare is not None and compare[0] == compare[1]:
        raise typer.BadParameter(f"--compare needs two different variants, not {compare[0]!r} twice")
    docs_dir = docs or dataset.parent / "docs"
    try:
        picked, documents = load_question_set(dataset, docs_dir, limit=limit, seed=seed)
    except (DatasetError, OSError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    if docs_as == "text":
        documents = {name: as_plain_text(document) for name, document in documents.items()}
    by_org = picked[0].org is not None
    if by_org and agent:
        raise typer.BadParameter(
            "a callers-dev set needs one agent per organisation: run it in-process (without --url)"
        )
    variants: list[str | None] = list(compare) if compare else [variant]
    out_dir = _writable_out(out, inside=docs_dir)
    config: dict[str, Any] = {
        "mode": "remote" if url else "in-process",
        "format": "callers-dev" if by_org else "squad-dev",
        "dataset": str(dataset),
        "docs": str(docs_dir),
        "docs_as": docs_as,
        "url": url,
        "variants": [_label(v) for v in variants],
        "limit": limit,
        "seed": seed,
        "questions": len(picked),
        "concurrency": concurrency,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
    }
    _quiet_loggers()
    started = time.perf_counter()
    interrupted = False
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(_terminate_as_interrupt())
        if url and key and agent:
            evaluation = asyncio.run(_remote(url, key, agent, picked, documents, variants, concurrency))
        else:
            settings = evaluation_settings()
            config["service"] = _service_settings(settings)
            # A broken prompt file stops the run before it starts.
            config["prompts"] = prompts_config(load_prompts(settings), settings.prompts_dir)
            with embedded_postgres() as database_url:
                evaluation = asyncio.run(
                    _in_process(database_url, settings, picked, documents, variants, concurrency)
                )
    except (ServiceError, httpx.HTTPError, PromptError) as exc:
        _fail(exc, url)
    except EvaluationInterrupted as exc:
        evaluation, interrupted = exc.evaluation, True
        config["interrupted_after"] = len(evaluation.rows[0])
    finally:
        stack.close()
    config["duration_s"] = round(time.perf_counter() - started, 1)
    document, markdown = build_report(config, evaluation)
    json_path, md_path = write_report(out_dir, document, markdown)
    _echo_headline(document)
    typer.echo(f"report: {md_path}\n        {json_path}")
    if interrupted:
        typer.echo(
            f"interrupted: the report covers the {len(evaluation.rows[0])} of {len(picked)} questions "
            "answered before it",
            err=True,
        )
        raise typer.Exit(130)
    _warn_of_errors(document, len(picked) * len(variants))
    return out_dir


async def _remote(
    url: str,
    key: str,
    agent: str,
    questions: Sequence[Question],
    documents: Mapping[str, Document],
    variants: Sequence[str | None],
    concurrency: int,
) -> Evaluation:
    async with httpx.AsyncClient(base_url=url, timeout=_REMOTE_TIMEOUT_S) as http:
        return await evaluate(
            ServiceClient(http, key),
            questions,
            documents,
            variants=variants,
            agent_id=agent,
            concurrency=concurrency,
            show_progress=True,
        )


async def _in_process(
    database_url: str,
    settings: Settings,
    questions: Sequence[Question],
    documents: Mapping[str, Document],
    variants: Sequence[str | None],
    concurrency: int,
) -> Evaluation:
    async with in_process_service(database_url, settings) as client:
        return await evaluate(
            client, questions, documents, variants=variants, concurrency=concurrency, show_progress=True
        )


def _echo_headline(document: dict[str, Any]) -> None:
    summaries: dict[str, dict[str, Any]] = (
        document["metrics"] if document["kind"] == "compare" else {"": document["metrics"]}
    )
    for name, summary in summaries.items():
        if name:
            typer.echo(f"[{name}]")
        for label, path, kind in HEADLINE:
            if label in _ECHOED:
                typer.echo(f"  {label:<40} {fmt(metric(summary, path), kind)}")
        for title, table in (
            ("by question kind", kind_table(summary)),
            ("reliability", reliability_table(summary)),
        ):
            if table:
                typer.echo(f"  {title}:")
                for line in table:
                    typer.echo(f"  {line}")


def replay_command(
    *,
    agent: str,
    last: int,
    variant: str,
    url: str | None,
    key: str | None,
    out: Path | None,
    concurrency: int,
) -> Path:
    """Run ``vk replay``; returns the folder holding report.json and report.md."""
    if not url or not key:
        raise typer.BadParameter(
            "replay asks a running service: give its --url and an admin --key of the agent's organisation"
        )
    out_dir = _writable_out(out)
    config: dict[str, Any] = {
        "mode": "replay",
        "url": url,
        "agent_id": agent,
        "variant": variant,
        "last": last,
        "concurrency": concurrency,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    _quiet_loggers()
    try:
        document, markdown = asyncio.run(_replay(url, key, agent, last, variant, concurrency, config))
    except (ServiceError, httpx.HTTPError) as exc:
        _fail(exc, url)
    json_path, md_path = write_report(out_dir, document, markdown)
    metrics = document["metrics"]
    typer.echo(
        f"{metrics['questions_replayed']} questions replayed: {metrics['changed_status']} changed status, "
        f"{metrics['changed_answer']} changed answer"
    )
    typer.echo(f"report: {md_path}\n        {json_path}")
    _warn_of_errors(document, metrics["questions_replayed"])
    return out_dir


async def _replay(
    url: str, key: str, agent: str, last: int, variant: str, concurrency: int, config: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    async with httpx.AsyncClient(base_url=url, timeout=_REMOTE_TIMEOUT_S) as http:
        return await replay_with(
            ServiceClient(http, key),
            agent,
            last=last,
            variant=variant,
            concurrency=concurrency,
            config=config,
            show_progress=True,
        )


async def replay_with(
    client: ServiceClient,
    agent_id: str,
    *,
    last: int,
    variant: str,
    config: dict[str, Any] | None = None,
    concurrency: int = 1,
    show_progress: bool = False,
) -> tuple[dict[str, Any], str]:
    """Replay the agent's last ``last`` logged questions with ``variant``; the report."""
    started = time.perf_counter()
    config = dict(config or {"agent_id": agent_id, "variant": variant, "last": last})
    entries, read = await fetch_logged(client, agent_id, last)
    progress = Progress(len(entries), "replaying", enabled=show_progress)
    try:
        rows = await replay(client, agent_id, entries, variant, concurrency=concurrency, progress=progress)
    finally:
        progress.close()
    config["duration_s"] = round(time.perf_counter() - started, 1)
    return replay_report(config, rows, read)
