"""The semantic answer cache's threshold (app/query/semantic_cache.py), on two sets.

callers-dev (``../shared/eval/callers-dev``): within one organisation, two questions whose
gold is the same sentence of the same document ask the same thing: a paraphrase pair, where
a hit is right. Two with different gold (or an unanswerable one against an answerable one)
must never share an answer: a hit there is wrong. Only answerable questions are cached (the
cache keeps answered replies), so a pair is (cached answerable question, new question of the
same organisation).

Each question's vector is the one the service computes (QueryService.question_vector:
normalised, the offline default embedder, the asking part leading), and the decision is the
cache's own lookup. Reported per threshold, with and without the particulars check:

- pairs: the share of paraphrase pairs that hit, and the number of must-not-hit pairs that do;
- calls: each question asked with every other answerable question of its organisation
  cached: how many get a right answer from the cache and how many a wrong one.

callers-dev has few paraphrase pairs (questions rarely share a gold sentence, and those that
do often ask for another fact of it), so bench/data/semantic_paraphrases.jsonl adds, for 36
of its answerable questions, three rewordings that ask the same (``same``: must hit) and two
or three questions of the same shape about another thing, number or place (``different``:
must not hit): "How much is a cleaning for a child?" against "How much is a cleaning for an
adult?". Each is compared with its own callers-dev question, cached. Eight more entries name
their own question (``question``) and ask its opposite by a word of time, place, direction
or asking ("before" and "after" the procedure, check-in and check-out, who and where).

No database is needed (the engine is never connected)::

    .venv/bin/python -m bench.semantic_cache_eval [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import PROJECT_ROOT, Settings
from app.embeddings.factory import build_embedder
from app.evaluation.dataset import Question, load_questions
from app.prompting import PromptLibrary
from app.query.retrieval import Retriever
from app.query.semantic_cache import SemanticAnswerCache, particulars, same_particulars
from app.query.service import QueryService, normalise_question
from bench.metering import machine_info
from bench.report import now_iso

QUESTIONS = PROJECT_ROOT.parent / "shared" / "eval" / "callers-dev" / "questions.jsonl"
THRESHOLDS = (0.70, 0.75, 0.80, 0.85, 0.88, 0.90, 0.92, 0.94, 0.96)
PARAPHRASES = PROJECT_ROOT / "bench" / "data" / "semantic_paraphrases.jsonl"
SCOPE = ("bench",)


def gold(q: Question) -> tuple[str, str] | None:
    return (q.doc, q.gold_sentence) if q.answerable and q.doc and q.gold_sentence else None


async def question_vectors(texts: Sequence[str]) -> tuple[str, np.ndarray]:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    embedder = build_embedder(settings, None)
    service = QueryService(
        # Never connected: question_vector needs only the embedder.
        engine=create_async_engine("postgresql+asyncpg://unused/unused"),
        embedder=embedder,
        retriever=Retriever(
            dimensions=embedder.dimensions, pgvector_version=(0, 8), exact_max_chunks=0, rrf_k=60
        ),
        prompts=PromptLibrary.load(settings.prompts_dir),
        llm=None,
        settings=settings.query,
        embed_timeout_s=30.0,
    )
    rows = []
    for text in texts:
        vector = await service.question_vector(text)
        assert vector is not None
        rows.append(np.asarray(vector, dtype=np.float32))
    return embedder.model_key, np.vstack(rows)


def pairs(questions: Sequence[Question], vectors: np.ndarray) -> list[tuple[float, bool, bool]]:
    """(similarity, same gold, particulars agree) of every (cached, new) pair."""
    marks = [particulars(normalise_question(q.question)) for q in questions]
    out = []
    for i, cached in enumerate(questions):
        if gold(cached) is None:
            continue
        for j, new in enumerate(questions):
            if i == j or new.org != cached.org:
                continue
            similarity = float(vectors[i] @ vectors[j])
            agree = same_particulars(marks[j], marks[i])
            out.append((similarity, gold(new) == gold(cached), agree))
    return out


def calls(questions: Sequence[Question], vectors: np.ndarray, threshold: float) -> dict[str, int]:
    """Each question asked with every other answerable question of its organisation cached,
    through the cache's own lookup: right (same gold), wrong, or a miss."""
    right = wrong = 0
    for j, new in enumerate(questions):
        cache = SemanticAnswerCache(threshold=threshold, ttl_s=3600)
        for i, cached in enumerate(questions):
            if i != j and cached.org == new.org and gold(cached) is not None:
                cache.store(
                    SCOPE,
                    normalise_question(cached.question),
                    vectors[i],
                    query_id=uuid.uuid4(),
                    reply={"gold": list(gold(cached) or ())},
                )
        match = cache.lookup(SCOPE, normalise_question(new.question), vectors[j])
        if match is not None:
            if tuple(match.reply["gold"]) == gold(new):
                right += 1
            else:
                wrong += 1
    return {"right": right, "wrong": wrong}


def lookup_cost(vectors: np.ndarray, per_scope: int, repeats: int = 2000) -> float:
    """Microseconds per lookup in a full scope (a miss: every row compared, none passes)."""
    cache = SemanticAnswerCache(threshold=0.999, ttl_s=3600)
    rng = np.random.default_rng(0)
    for n in range(per_scope):
        row = vectors[n % len(vectors)] + rng.normal(0, 0.05, vectors.shape[1]).astype(np.float32)
        cache.store(SCOPE, f"q{n}", row / np.linalg.norm(row), query_id=uuid.uuid4(), reply={})
    probe = [float(x) for x in vectors[0]]  # a call's vector arrives as a list or an array
    t = time.perf_counter()
    for _ in range(repeats):
        cache.lookup(SCOPE, "probe", probe)
    return (time.perf_counter() - t) / repeats * 1e6


def rewordings(questions: Sequence[Question], path: Path) -> list[tuple[str, str, bool]]:
    """(cached question, new question, same) from the rewordings file."""
    by_id = {q.id: q.question for q in questions}
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            raw = json.loads(line)
            cached = raw["question"] if "question" in raw else by_id[raw["id"]]
            out += [(cached, text, True) for text in raw["same"]]
            out += [(cached, text, False) for text in raw["different"]]
    return out


def reworded_table(scored: Sequence[tuple[float, bool, bool]]) -> list[dict[str, Any]]:
    same = sum(1 for _, s, _ in scored if s)
    different = len(scored) - same
    table = []
    for threshold in THRESHOLDS:
        above = [(s, ok) for sim, s, ok in scored if sim >= threshold]
        table.append(
            {
                "threshold": threshold,
                "hit_rate": round(sum(1 for s, _ in above if s) / same, 3),
                "false_hits": f"{sum(1 for s, _ in above if not s)}/{different}",
                "hit_rate_checked": round(sum(1 for s, ok in above if s and ok) / same, 3),
                "false_hits_checked": f"{sum(1 for s, ok in above if not s and ok)}/{different}",
            }
        )
    return table


async def run(path: Path, paraphrases: Path) -> dict[str, Any]:
    questions = load_questions(path)
    reworded = rewordings(questions, paraphrases)
    known = {q.question for q in questions}
    extra = sorted({text for pair in reworded for text in pair[:2]} - known)
    t = time.perf_counter()
    model_key, vectors = await question_vectors([q.question for q in questions] + extra)
    embed_s = time.perf_counter() - t
    index = {text: vectors[len(questions) + i] for i, text in enumerate(extra)}
    index.update({q.question: vectors[i] for i, q in enumerate(questions)})
    vectors = vectors[: len(questions)]
    reworded_scored = [
        (
            float(index[cached] @ index[new]),
            same,
            same_particulars(particulars(normalise_question(new)), particulars(normalise_question(cached))),
        )
        for cached, new, same in reworded
    ]
    scored = pairs(questions, vectors)
    positives = sum(1 for _, same, _ in scored if same)
    table = []
    for threshold in THRESHOLDS:
        above = [(same, agree) for s, same, agree in scored if s >= threshold]
        table.append(
            {
                "threshold": threshold,
                "pair_hit_rate": round(sum(1 for same, _ in above if same) / positives, 3),
                "pair_false_hits": sum(1 for same, _ in above if not same),
                "pair_hit_rate_checked": round(sum(1 for same, ok in above if same and ok) / positives, 3),
                "pair_false_hits_checked": sum(1 for same, ok in above if not same and ok),
                "calls": calls(questions, vectors, threshold),
            }
        )
    return {
        "when": now_iso(),
        "machine": machine_info(),
        "questions": len(questions),
        "model_key": model_key,
        "embed_s": round(embed_s, 1),
        "paraphrase_pairs": positives,
        "must_not_hit_pairs": len(scored) - positives,
        "table": table,
        "reworded": {
            "same": sum(1 for _, _, same in reworded if same),
            "different": sum(1 for _, _, same in reworded if not same),
            "table": reworded_table(reworded_scored),
        },
        "lookup_us": {n: round(lookup_cost(vectors, n), 1) for n in (16, 64, 256)},
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--paraphrases", type=Path, default=PARAPHRASES)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.questions, args.paraphrases))
    print(
        f"{result['questions']} questions, {result['model_key']}: {result['paraphrase_pairs']} paraphrase "
        f"pairs, {result['must_not_hit_pairs']} must-not-hit pairs"
    )
    print("threshold | pair hits | false | pair hits, checked | false, checked | calls right | calls wrong")
    for row in result["table"]:
        print(
            f"{row['threshold']:.2f} | {row['pair_hit_rate']:.3f} | {row['pair_false_hits']} | "
            f"{row['pair_hit_rate_checked']:.3f} | {row['pair_false_hits_checked']} | "
            f"{row['calls']['right']} | {row['calls']['wrong']}"
        )
    reworded = result["reworded"]
    print(f"rewordings: {reworded['same']} same (must hit), {reworded['different']} different (must not)")
    print("threshold | hit rate | false hits | hit rate, checked | false hits, checked")
    for row in reworded["table"]:
        print(
            f"{row['threshold']:.2f} | {row['hit_rate']:.3f} | {row['false_hits']} | "
            f"{row['hit_rate_checked']:.3f} | {row['false_hits_checked']}"
        )
    print("lookup, us per call by entries in the scope:", result["lookup_us"])
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
