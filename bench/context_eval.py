"""Conversation context (app/query/conversation.py): does a follow-up find its passage?

The final questions of bench/data/multiturn.jsonl (short calls over callers-dev's five
organisations; bench/data/README.md) are asked three ways, through the evaluation harness
in process (app/evaluation: embedded PostgreSQL, the real app, one knowledge base and one
agent per organisation), offline (no OPENAI_API_KEY: the default embedder and the offline
completion):

- ``alone``: the final question without its history (the service as it was);
- ``context``: with its history, so the service makes it standalone first;
- ``reference``: the conversation's hand-written standalone question, alone: what a perfect
  rewrite would reach.

Measured: retrieval hit@5 (the gold passage among the first five candidates), overall and
by conversation kind, and how many replies were right (the gold answers spoken)::

    .venv/bin/python -m bench.context_eval --json /tmp/context.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.config import PROJECT_ROOT, Settings
from app.evaluation.dataset import Question, load_documents, locate_gold_paragraphs
from app.evaluation.inprocess import embedded_postgres, evaluation_settings, in_process_service
from app.evaluation.runner import Row, load_organisations, run_questions
from app.query.conversation import Turn, complete_offline
from bench.metering import machine_info
from bench.report import now_iso

DATA = PROJECT_ROOT / "bench" / "data" / "multiturn.jsonl"
DOCS = PROJECT_ROOT.parent / "shared" / "eval" / "callers-dev" / "docs"
WAYS = ("alone", "context", "reference")
HIT_AT = 5


def load_conversations(path: Path) -> tuple[list[Question], dict[str, str]]:
    """The conversations as questions carrying their history, and each one's reference
    standalone question by id."""
    questions: list[Question] = []
    references: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        questions.append(
            Question(
                id=raw["id"],
                question=raw["question"],
                answers=tuple(raw["answers"]),
                doc=raw["doc"],
                paragraph_index=None,
                org=raw["org"],
                kind=raw["kind"],
                gold_sentence=raw["gold_sentence"],
                history=tuple((t["role"], t["content"]) for t in raw["history"]),
            )
        )
        references[raw["id"]] = raw["standalone"]
    return questions, references


def summarise(rows: Sequence[Row]) -> dict[str, Any]:
    def share(count: int) -> float:
        return round(count / len(rows), 3)

    return {
        "n": len(rows),
        "hit@1": share(sum(1 for r in rows if r.gold_rank == 1)),
        f"hit@{HIT_AT}": share(sum(1 for r in rows if r.gold_rank is not None and r.gold_rank <= HIT_AT)),
        "right": share(sum(1 for r in rows if r.right)),
    }


async def _ask(url: str, settings: Settings, questions: list[Question], references: dict[str, str]) -> Any:
    documents = load_documents(DOCS, questions)
    questions = locate_gold_paragraphs(questions, documents)
    asked = {
        "alone": [replace(q, history=()) for q in questions],
        "context": questions,
        "reference": [replace(q, question=references[q.id], history=()) for q in questions],
    }
    async with in_process_service(url, settings) as client:
        knowledge = await load_organisations(client, documents)
        results: dict[str, list[Row]] = {}
        for way in WAYS:
            t = time.perf_counter()
            (rows,) = await run_questions(client, knowledge, asked[way], documents)
            results[way] = rows
            print(f"{way}: {len(rows)} questions in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return questions, results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", type=Path, default=None, help="write the figures and every row here")
    args = parser.parse_args(argv)
    questions, references = load_conversations(args.data)
    # Offline whatever the environment says: this measures the offline completion.
    settings = evaluation_settings(Settings(_env_file=None)).model_copy(update={"openai_api_key": None})  # type: ignore[call-arg]
    # Each final question is asked three ways in one process: with the semantic answer cache
    # on, a later way would be served an earlier way's answer, with no retrieval to measure.
    query = settings.query.model_copy(update={"semantic_cache_threshold": 0})
    settings = settings.model_copy(update={"query": query})
    with embedded_postgres() as url:
        questions, results = asyncio.run(_ask(url, settings, questions, references))
    kinds = sorted({q.kind or "" for q in questions})
    table: dict[str, dict[str, Any]] = {}
    for group in ("all", *kinds):
        table[group] = {way: summarise([r for r in results[way] if group in ("all", r.kind)]) for way in WAYS}
    completed = sum(
        1
        for q in questions
        if complete_offline(q.question, [Turn(role, text) for role, text in q.history]).method == "offline"  # type: ignore[arg-type]
    )
    print(f"\n{len(questions)} conversations; the offline rule completed {completed} final questions\n")
    print(f"each cell: hit@{HIT_AT} / hit@1 / replies right\n")
    print("| kind | n | " + " | ".join(WAYS) + " |")
    print("|---|---|" + "---|" * len(WAYS))
    for group, ways in table.items():
        cells = [
            f"{ways[way][f'hit@{HIT_AT}']:.3f} / {ways[way]['hit@1']:.3f} / {ways[way]['right']:.3f}"
            for way in WAYS
        ]
        print(f"| {group} | {ways['alone']['n']} | " + " | ".join(cells) + " |")
    if args.json is not None:
        document = {
            "when": now_iso(),
            "machine": machine_info(),
            "embedding": settings.embedding_provider,
            "completed_offline": completed,
            "table": table,
            "rows": {
                way: [
                    {
                        "id": r.id,
                        "kind": r.kind,
                        "question": r.question,
                        "gold_rank": r.gold_rank,
                        "right": r.right,
                    }
                    for r in rows
                ]
                for way, rows in results.items()
            },
        }
        args.json.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
