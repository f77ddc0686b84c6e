"""Summaries of scored rows, and the two files of every run: ``report.json`` for machines
(config, metrics, every row) and ``report.md`` for people (headline table, outcomes by
question kind when the set has kinds, the reliability of the confidence, worst cases)."""

from __future__ import annotations

import html
import json
import os
import platform
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.evaluation.metrics import (
    EMBEDDING_PRICE_PER_M,
    HIGH_CONFIDENCE,
    hit_at_k,
    llm_prices,
    model_costs,
    mrr_at_k,
    not_found_scores,
    percentile,
    reliability,
    tokens_by_model,
)
from app.evaluation.runner import Row

__all__ = [
    "HEADLINE",
    "compare_report",
    "eval_report",
    "fmt",
    "kind_table",
    "latency",
    "machine",
    "md_cell",
    "md_table",
    "metric",
    "reliability_table",
    "row_record",
    "summarise",
    "write_report",
]

# Worst cases shown per kind in report.md; report.json keeps every row.
WORST_CASES = 15
_ANSWER_CHARS = 300


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def latency(values: Sequence[float]) -> dict[str, float | None]:
    """p50/p90/p99 and mean of a list of milliseconds."""
    return {
        "p50": _round(percentile(values, 50), 1),
        "p90": _round(percentile(values, 90), 1),
        "p99": _round(percentile(values, 99), 1),
        "mean": _round(sum(values) / len(values), 1) if values else None,
    }


def _share(part: int, whole: int) -> float | None:
    return _round(part / whole) if whole else None


def _wrong_confident(rows: Sequence[Row]) -> int:
    return sum(1 for r in rows if r.status == "answered" and not r.right and r.confidence >= HIGH_CONFIDENCE)


def _reused(row: Row) -> bool:
    """A reply served from a cache without retrieval: in debug mode, which bypasses the exact
    cache, the semantic answer cache's (a paraphrase answered before). It has no candidates,
    so its retrieval is not scored, neither hit nor miss."""
    return row.cached and not row.candidates


def _ranks(rows: Sequence[Row]) -> list[int | None]:
    """The gold passage's rank of each answerable question that retrieved."""
    return [r.gold_rank for r in rows if r.answerable and not _reused(r)]


def _outcomes(rows: Sequence[Row]) -> dict[str, Any]:
    """The per-kind figures of a group of rows; None where the group has no question it applies to."""
    answerable = [r for r in rows if r.answerable]
    unanswerable = [r for r in rows if not r.answerable]
    return {
        "questions": len(rows),
        "hit@5": _round(hit_at_k(_ranks(rows), 5)),
        "contains_gold": _share(sum(bool(r.correct) for r in answerable), len(answerable)),
        "answerable_refused": _share(sum(r.status == "not_found" for r in answerable), len(answerable)),
        "unanswerable_not_found": _share(
            sum(r.status == "not_found" for r in unanswerable), len(unanswerable)
        ),
        "wrong_high_confidence": _wrong_confident(rows),
    }


def _by_kind(rows: Sequence[Row]) -> dict[str, dict[str, Any]]:
    """Outcomes per question kind: kinds with answerable questions first, each group in
    the order the kinds first appear; empty for a set without kinds."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        if row.kind is not None:
            groups.setdefault(row.kind, []).append(row)
    order = sorted(groups, key=lambda kind: not any(r.answerable for r in groups[kind]))
    return {kind: _outcomes(groups[kind]) for kind in order}


def _reliability(rows: Sequence[Row]) -> dict[str, Any]:
    """Answered replies by confidence bin, and the figures of the high-confidence answers."""
    answered = [r for r in rows if r.status == "answered"]
    bins = reliability((r.confidence, r.right) for r in answered)
    confident = [r for r in answered if r.confidence >= HIGH_CONFIDENCE]
    right = sum(r.right for r in confident)
    return {
        "bins": [
            {
                "low": b.low,
                "high": b.high,
                "answered": b.answered,
                "right": b.right,
                "share_right": _round(b.share_right),
            }
            for b in bins
        ],
        "high_confidence": {
            "threshold": HIGH_CONFIDENCE,
            "answered": len(confident),
            "right": right,
            "precision": _share(right, len(confident)),
            "wrong": len(confident) - right,
        },
    }


def summarise(rows: Sequence[Row]) -> dict[str, Any]:
    """Every metric of one run (one variant) over its rows."""
    answerable = [r for r in rows if r.answerable]
    replied = [r for r in rows if r.http_status == 200]
    answered = [r for r in replied if r.status == "answered"]
    ranks = _ranks(rows)
    nf = not_found_scores((r.answerable, r.status) for r in rows)
    calls = len(rows) or 1
    prompt = sum(r.prompt_tokens for r in rows)
    completion = sum(r.completion_tokens for r in rows)
    embedding = sum(r.embedding_tokens for r in rows)
    by_model = tokens_by_model(((r.model, r.prompt_tokens, r.completion_tokens) for r in rows), calls)
    cost = model_costs(by_model, embedding / calls)
    outcomes = _outcomes(rows)
    confidence = _reliability(rows)
    return {
        "questions": len(rows),
        "answerable": len(answerable),
        "unanswerable": len(rows) - len(answerable),
        "http_errors": len(rows) - len(replied),
        "status_counts": dict(sorted(Counter(r.status for r in rows).items())),
        "retrieval": {
            "hit@1": _round(hit_at_k(ranks, 1)),
            "hit@3": _round(hit_at_k(ranks, 3)),
            "hit@5": _round(hit_at_k(ranks, 5)),
            "mrr@10": _round(mrr_at_k(ranks, 10)),
            "candidates_returned_max": max((len(r.candidates) for r in rows), default=0),
            # Served by the semantic answer cache: left out of the figures above.
            "reused": sum(_reused(r) for r in rows),
        },
        "answers": {
            "contains_gold": _round(sum(bool(r.correct) for r in answerable) / len(answerable))
            if answerable
            else None,
            "token_f1": _round(sum(r.f1 or 0.0 for r in answerable) / len(answerable))
            if answerable
            else None,
            "answered_share": _round(len(answered) / len(rows)) if rows else None,
            # Counts, not shares: a change that trades right answers for wrong ones shows here
            # although every share may move by less than its rounding.
            "answered_right": sum(r.right for r in answered),
            "answered_wrong": sum(not r.right for r in answered),
            "speakable_share": _round(sum(not r.speech_problems for r in answered) / len(answered))
            if answered
            else None,
            "degraded": sum(r.degraded for r in rows),
        },
        "not_found": {
            "precision": _round(nf.precision),
            "recall": _round(nf.recall),
            "true_positives": nf.true_positives,
            "false_positives": nf.false_positives,
            "false_negatives": nf.false_negatives,
        },
        "refusals": {
            "answerable_not_found": outcomes["answerable_refused"],
            "unanswerable_not_found": outcomes["unanswerable_not_found"],
        },
        "high_confidence": confidence["high_confidence"],
        "reliability": confidence["bins"],
        "by_kind": _by_kind(rows),
        "latency_ms": {
            "service_total": latency([r.timings_ms["total"] for r in replied if "total" in r.timings_ms]),
            "client_round_trip": latency([r.client_ms for r in rows]),
        },
        "tokens": {
            "llm_calls": sum(1 for r in rows if r.prompt_tokens or r.completion_tokens),
            "prompt_total": prompt,
            "completion_total": completion,
            "embedding_total_estimated": embedding,
            "prompt_per_call": _round(prompt / calls, 2),
            "completion_per_call": _round(completion / calls, 2),
            "embedding_per_call_estimated": _round(embedding / calls, 2),
        },
        "cost_per_1000_calls_usd": {key: _round(value, 6) for key, value in cost.items()},
        # Per model that answered: [input, output], null for a model with no listed price
        # (its calls then have no cost, rather than another model's).
        "prices_usd_per_million_tokens": {
            "llm": {model: _prices(model) for model in sorted(by_model)},
            "embedding": EMBEDDING_PRICE_PER_M,
        },
    }


def metric(summary: dict[str, Any], path: tuple[str, ...]) -> Any:
    """A value of a summary by its key path (None when absent)."""
    value: Any = summary
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


# (label, key path in the summary, format): the headline table of every report.
HEADLINE: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("Retrieval hit@1", ("retrieval", "hit@1"), "share"),
    ("Retrieval hit@3", ("retrieval", "hit@3"), "share"),
    ("Retrieval hit@5", ("retrieval", "hit@5"), "share"),
    ("Retrieval MRR@10", ("retrieval", "mrr@10"), "share"),
    ("Served by semantic cache (no retrieval)", ("retrieval", "reused"), "count"),
    ("Answer contains gold", ("answers", "contains_gold"), "share"),
    ("Token F1 (mean)", ("answers", "token_f1"), "share"),
    ("not_found precision", ("not_found", "precision"), "share"),
    ("not_found recall", ("not_found", "recall"), "share"),
    ("Answerable refused (not_found)", ("refusals", "answerable_not_found"), "share"),
    ("Unanswerable → not_found", ("refusals", "unanswerable_not_found"), "share"),
    ("Precision of answers, confidence ≥ 0.9", ("high_confidence", "precision"), "share"),
    ("Wrong answers, confidence ≥ 0.9", ("high_confidence", "wrong"), "count"),
    ("Answered (all questions)", ("answers", "answered_share"), "share"),
    ("Answers right (count)", ("answers", "answered_right"), "count"),
    ("Answers wrong (count)", ("answers", "answered_wrong"), "count"),
    # Replies whose model answer was refused (a made-up number, its own prompt repeated) or
    # failed, read from the passages instead: the prompt under test did not make them.
    ("Model answers not used (degraded)", ("answers", "degraded"), "count"),
    ("Speakable answers", ("answers", "speakable_share"), "share"),
    ("Service time p50 (ms)", ("latency_ms", "service_total", "p50"), "ms"),
    ("Service time p90 (ms)", ("latency_ms", "service_total", "p90"), "ms"),
    ("Service time p99 (ms)", ("latency_ms", "service_total", "p99"), "ms"),
    ("Round trip p50 (ms)", ("latency_ms", "client_round_trip", "p50"), "ms"),
    ("Round trip p90 (ms)", ("latency_ms", "client_round_trip", "p90"), "ms"),
    ("Round trip p99 (ms)", ("latency_ms", "client_round_trip", "p99"), "ms"),
    ("Prompt tokens per call", ("tokens", "prompt_per_call"), "tokens"),
    ("Completion tokens per call", ("tokens", "completion_per_call"), "tokens"),
    ("Embedding tokens per call (est.)", ("tokens", "embedding_per_call_estimated"), "tokens"),
    ("Cost per 1,000 calls (USD)", ("cost_per_1000_calls_usd", "total"), "usd"),
)


def fmt(value: Any, kind: str = "") -> str:
    """A metric value as shown in report.md."""
    if value is None:
        return "n/a"
    if kind == "share":
        return f"{value:.3f}"
    if kind in {"ms", "tokens"}:
        return f"{value:.1f}"
    if kind == "usd":
        return f"{value:.4f}"
    return str(value)


def _delta(a: Any, b: Any, kind: str) -> str:
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return "n/a"
    difference = b - a
    return "0" if difference == 0 else ("+" if difference > 0 else "-") + fmt(abs(difference), kind)


_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def md_cell(value: Any, limit: int = _ANSWER_CHARS) -> str:
    """Text fit for one Markdown table cell: one line, cut at ``limit``, pipes and HTML escaped
    (a question or answer is shown as written, never rendered), control characters left out."""
    text = _CONTROLS.sub("", " ".join(str(value).split()))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return html.escape(text, quote=False).replace("|", "\\|")


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Markdown table lines."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(md_cell(cell) for cell in row) + " |" for row in rows)
    return lines


def kind_table(summary: dict[str, Any]) -> list[str]:
    """Markdown lines of the per-kind table (none for a set without kinds), with a last
    row for all questions."""
    kinds: dict[str, dict[str, Any]] = summary.get("by_kind") or {}
    if not kinds:
        return []
    everything = {
        "questions": summary["questions"],
        "hit@5": metric(summary, ("retrieval", "hit@5")),
        "contains_gold": metric(summary, ("answers", "contains_gold")),
        "answerable_refused": metric(summary, ("refusals", "answerable_not_found")),
        "unanswerable_not_found": metric(summary, ("refusals", "unanswerable_not_found")),
        "wrong_high_confidence": metric(summary, ("high_confidence", "wrong")),
    }
    return md_table(
        [
            "kind",
            "questions",
            "hit@5",
            "answer contains gold",
            "refused when answerable",
            "not_found when unanswerable",
            "wrong answers, confidence ≥ 0.9",
        ],
        [
            [
                kind,
                figures["questions"],
                fmt(figures["hit@5"], "share"),
                fmt(figures["contains_gold"], "share"),
                fmt(figures["answerable_refused"], "share"),
                fmt(figures["unanswerable_not_found"], "share"),
                figures["wrong_high_confidence"],
            ]
            for kind, figures in [*kinds.items(), ("all", everything)]
        ],
    )


def reliability_table(summary: dict[str, Any]) -> list[str]:
    """Markdown lines of the reliability table: answered replies by confidence bin."""
    last = len(summary["reliability"]) - 1
    return md_table(
        ["confidence", "answered", "right", "share right"],
        [
            [
                f"[{b['low']:.1f}, {b['high']:.1f}{']' if i == last else ')'}",
                b["answered"],
                b["right"],
                fmt(b["share_right"], "share"),
            ]
            for i, b in enumerate(summary["reliability"])
        ],
    )


def _outcome_sections(summary: dict[str, Any], suffix: str = "") -> list[str]:
    lines: list[str] = []
    kinds = kind_table(summary)
    if kinds:
        lines += ["", f"## By question kind{suffix}", "", *kinds]
    lines += [
        "",
        f"## Reliability of the confidence{suffix}",
        "",
        "_Replies with status answered, by their confidence; an answered unanswerable question is wrong._",
        "",
        *reliability_table(summary),
    ]
    return lines


def row_record(row: Row) -> dict[str, Any]:
    """One row as report.json holds it; ``org``, ``kind`` and ``confidence_parts`` only when
    the set or the reply has them."""
    record = asdict(row)
    for key in ("org", "kind", "confidence_parts"):
        if record[key] is None:
            del record[key]
    return record


def machine() -> dict[str, Any]:
    """Where the run happened, for the record."""
    return {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }


def _gold(row: Row) -> str:
    return " / ".join(row.answers) if row.answers else "(unanswerable)"


def _worst(rows: Sequence[Row]) -> list[tuple[str, str, list[Row], Callable[[Row], Any]]]:
    wrong = [r for r in rows if r.answerable and r.status == "answered" and not r.correct]
    missed = [r for r in rows if not r.answerable and r.status == "answered"]
    false_nf = [r for r in rows if r.answerable and r.status == "not_found"]
    return [
        (
            "Wrong answers",
            "answerable, answered, but no gold answer in the reply; most confident first",
            wrong,
            lambda r: (-r.confidence, r.id),
        ),
        (
            "Missed not_founds",
            "unanswerable, yet answered; most confident first",
            missed,
            lambda r: (-r.confidence, r.id),
        ),
        (
            "False not_founds",
            "answerable, yet not_found; gold paragraph ranked highest first",
            false_nf,
            lambda r: (r.gold_rank or 99, -r.confidence, r.id),
        ),
    ]


def _worst_sections(rows: Sequence[Row]) -> list[str]:
    lines: list[str] = []
    for title, meaning, picked, key in _worst(rows):
        lines += ["", f"### {title} ({len(picked)})", "", f"_{meaning}; at most {WORST_CASES} shown._", ""]
        if not picked:
            lines.append("None.")
            continue
        lines += md_table(
            ["id", "question", "gold", "answer", "confidence", "gold rank"],
            [
                [r.id, r.question, _gold(r), r.answer, f"{r.confidence:.3f}", r.gold_rank or "-"]
                for r in sorted(picked, key=key)[:WORST_CASES]
            ],
        )
    return lines


def _config_lines(config: dict[str, Any]) -> list[str]:
    return [
        f"- {key}: `{value if isinstance(value, str) else json.dumps(value)}`"
        for key, value in config.items()
        if value not in (None, "", [], {})
    ]


def _offline_note(config: dict[str, Any]) -> list[str]:
    if config.get("answerers_seen") != ["extractive"]:
        return []
    return [
        "_Offline: the extractive answerer reads no prompt, so prompt variants can only change "
        "the fixed replies; answers differ between variants only when OPENAI_API_KEY is set._",
        "",
    ]


def _counts_line(summary: dict[str, Any]) -> str:
    counts = ", ".join(f"{status} {n}" for status, n in summary["status_counts"].items())
    return (
        f"{summary['questions']} questions ({summary['answerable']} answerable, "
        f"{summary['unanswerable']} unanswerable); replies: {counts}."
    )


def eval_report(config: dict[str, Any], rows: Sequence[Row]) -> tuple[dict[str, Any], str]:
    """report.json content and report.md text of a single-variant run."""
    summary = summarise(rows)
    document = {"kind": "eval", "config": config, "metrics": summary, "rows": [row_record(r) for r in rows]}
    lines = ["# Evaluation report", "", *_config_lines(config), "", _counts_line(summary), ""]
    lines += md_table(
        ["metric", "value"], [[label, fmt(metric(summary, path), kind)] for label, path, kind in HEADLINE]
    )
    lines += _outcome_sections(summary)
    lines += ["", "## Worst cases", *_worst_sections(rows), ""]
    return document, "\n".join(lines)


def _changed(a: Row, b: Row) -> bool:
    return a.status != b.status or (a.answerable and a.correct != b.correct)


def compare_report(
    config: dict[str, Any], labels: tuple[str, str], rows_a: Sequence[Row], rows_b: Sequence[Row]
) -> tuple[dict[str, Any], str]:
    """report.json content and report.md text of a two-variant comparison.

    Questions whose outcome changed (status, or correctness of an answerable question)
    come first, then the metrics side by side with B - A deltas.
    """
    first, second = labels
    summary_a, summary_b = summarise(rows_a), summarise(rows_b)
    pairs = list(zip(rows_a, rows_b, strict=True))
    changed = [(a, b) for a, b in pairs if _changed(a, b)]
    deltas = {
        label: _round(b - a) if isinstance(a, int | float) and isinstance(b, int | float) else None
        for label, path, _ in HEADLINE
        for a, b in [(metric(summary_a, path), metric(summary_b, path))]
    }
    document = {
        "kind": "compare",
        "config": config,
        "variants": [first, second],
        "metrics": {first: summary_a, second: summary_b},
        "delta_b_minus_a": deltas,
        "changed": [a.id for a, _ in changed],
        "rows": [{"id": a.id, first: row_record(a), second: row_record(b)} for a, b in pairs],
    }
    lines = [
        f"# Comparison: {first} (A) vs {second} (B)",
        "",
        *_config_lines(config),
        "",
        *_offline_note(config),
    ]
    lines += [f"A: {_counts_line(summary_a)}", "", f"B: {_counts_line(summary_b)}", ""]
    lines += [f"## Outcome changed ({len(changed)} of {len(pairs)})", ""]
    if changed:
        lines += md_table(
            [
                "id",
                "question",
                "gold",
                f"{first} status",
                f"{first} answer",
                f"{second} status",
                f"{second} answer",
            ],
            [[a.id, a.question, _gold(a), _outcome(a), a.answer, _outcome(b), b.answer] for a, b in changed],
        )
    else:
        lines.append("No question changed status or correctness.")
    lines += ["", "## Metrics side by side", ""]
    lines += md_table(
        ["metric", f"A: {first}", f"B: {second}", "B - A"],
        [
            [
                label,
                fmt(metric(summary_a, path), kind),
                fmt(metric(summary_b, path), kind),
                _delta(metric(summary_a, path), metric(summary_b, path), kind),
            ]
            for label, path, kind in HEADLINE
        ],
    )
    for label, summary in ((first, summary_a), (second, summary_b)):
        lines += _outcome_sections(summary, f": {label}")
    for label, rows in ((first, rows_a), (second, rows_b)):
        lines += ["", f"## Worst cases: {label}", *_worst_sections(rows)]
    lines.append("")
    return document, "\n".join(lines)


def _outcome(row: Row) -> str:
    if row.answerable and row.status == "answered":
        return "answered, right" if row.correct else "answered, wrong"
    return row.status


def write_report(out_dir: Path, document: dict[str, Any], markdown: str) -> tuple[Path, Path]:
    """Write report.json and report.md into ``out_dir`` (created if missing), each whole or
    not at all: a report already there is replaced only by a complete one."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "report.json", out_dir / "report.md"
    _replace(json_path, json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    _replace(md_path, markdown)
    return json_path, md_path


def _replace(path: Path, text: str) -> None:
    part = path.with_name(f".{path.name}.part")
    part.write_text(text, encoding="utf-8")
    part.replace(path)


def _prices(model: str | None) -> list[float] | None:
    prices = llm_prices(model)
    return None if prices is None else list(prices)
