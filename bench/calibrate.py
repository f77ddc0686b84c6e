"""Refit the offline default's confidence (app/query/confidence.py) from two `vk eval` reports.

The confidence is a logistic regression over what the extractive answerer saw. Whenever the
answerer's scoring or the retrieval changes, the features' scale moves and the weights must be
fitted again; this is how. Run both question sets without the gate, so that every reply's
features are kept whatever its confidence::

    export LIMITS__QUERY_PER_MINUTE=0 QUERY__MIN_ANSWER_CONFIDENCE=0
    vk eval ../shared/eval/callers-dev/questions.jsonl --out /tmp/cal-callers
    vk eval ../shared/eval/squad-dev/questions.jsonl --docs ../shared/eval/squad-dev/docs \
        --out /tmp/cal-squad
    .venv/bin/python -m bench.calibrate /tmp/cal-callers/report.json /tmp/cal-squad/report.json

"Right" is an answer that conveys the gold (`vk eval`'s `correct`); any answer to an
unanswerable question is wrong. Each set weighs the same, however many questions it has.
Held out: callers-dev by organisation (fit on four, score the fifth), squad-dev by document
(two halves of its articles, by name): every prediction scored comes from a fit that never
saw its group. The held-out logits are then rescaled once (a * logit + b, fitted on them)
because a fit on its own data overstates its top range; the rescale is folded into the
printed weights. Printed: Brier and reliability of the shipped weights and of the refit, held
out, and what each would do at the gate: answerable questions refused, and the share right
among answers given with confidence >= 0.9.

A reply the subject check refused (``off_subject``) has no features: it is left out, as the
service gives it 0 whatever the weights say.
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from app.config import QuerySettings
from app.query.confidence import FEATURES

# A small ridge keeps Newton's steps finite when a feature separates a fold perfectly; at this
# size it moves no weight by more than 0.01 on the two sets.
_RIDGE = 1e-6


@dataclass(frozen=True)
class Sample:
    x: npt.NDArray[np.float64]  # features, in FEATURES order, then 1 for the bias
    y: npt.NDArray[np.float64]  # 1 when the answer is right
    w: npt.NDArray[np.float64]  # each set sums to 1
    group: list[str]
    shipped: npt.NDArray[np.float64]  # the confidence the service gave


def load(paths: list[Path]) -> Sample:
    xs: list[list[float]] = []
    ys: list[float] = []
    ws: list[float] = []
    groups: list[str] = []
    shipped: list[float] = []
    for path in paths:
        rows = json.loads(path.read_text())["rows"]
        kept = [r for r in rows if _features(r) is not None]
        if not kept:
            raise SystemExit(f"{path}: no row carries confidence features (run vk eval again: see --help)")
        docs = sorted({r["doc"] or "" for r in kept})
        half = {doc: "a" if i < len(docs) / 2 else "b" for i, doc in enumerate(docs)}
        for r in kept:
            features = _features(r)
            assert features is not None
            xs.append([features[name] for name in FEATURES] + [1.0])
            ys.append(1.0 if r["answerable"] and r["status"] == "answered" and r["correct"] else 0.0)
            ws.append(1.0 / len(kept))
            groups.append(f"{path.parent.name}:{r.get('org') or half[r['doc'] or '']}")
            shipped.append(float(features["confidence"]))
        print(f"{path}: {len(kept)} replies with features of {len(rows)}")
    return Sample(np.array(xs), np.array(ys), np.array(ws), groups, np.array(shipped))


def _features(row: dict[str, Any]) -> dict[str, float] | None:
    parts = row.get("confidence_parts") or {}
    return parts if all(name in parts for name in FEATURES) else None


def fit(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], w: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Weighted logistic regression by Newton's method (the last column of x is the bias).

    Written here rather than taken from scikit-learn or statsmodels: neither is a dependency,
    and eleven features on the two sets' 7,000 replies converge in 5 to 7 steps of numpy."""
    beta = np.zeros(x.shape[1])
    ridge = _RIDGE * np.eye(x.shape[1])
    ridge[-1, -1] = 0.0  # the bias is not shrunk
    for _ in range(50):
        p = _sigmoid(x @ beta)
        gradient = x.T @ (w * (p - y)) + ridge @ beta
        hessian = (x * (w * p * (1 - p))[:, None]).T @ x + ridge
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-9:
            break
    return beta


def held_out_logits(sample: Sample) -> npt.NDArray[np.float64]:
    logits = np.zeros(len(sample.y))
    groups = np.array(sample.group)
    for group in sorted(set(sample.group)):
        inside = groups == group
        beta = fit(sample.x[~inside], sample.y[~inside], sample.w[~inside])
        logits[inside] = sample.x[inside] @ beta
    return logits


def rescale(logits: npt.NDArray[np.float64], sample: Sample) -> tuple[float, float]:
    """a and b of the one-feature logistic regression of the outcome on the held-out logit."""
    a, b = fit(np.column_stack([logits, np.ones_like(logits)]), sample.y, sample.w)
    return float(a), float(b)


def _sigmoid(z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))


def describe(name: str, p: npt.NDArray[np.float64], sample: Sample, gate: float) -> None:
    brier = float(np.sum(sample.w * (p - sample.y) ** 2) / np.sum(sample.w))
    print(f"\n{name}: Brier {brier:.4f} (each set weighing the same)")
    print("| confidence | replies | right | share right |")
    print("|---|---|---|---|")
    edges = sorted({0.0, gate, 0.5, 0.7, 0.8, 0.9, 1.01})
    for lo, hi in itertools.pairwise(edges):
        inside = (p >= lo) & (p < hi)
        n, right = int(inside.sum()), int(sample.y[inside].sum())
        share = f"{right / n:.3f}" if n else "n/a"
        print(f"| [{lo:g}, {min(hi, 1):g}) | {n} | {right} | {share} |")
    for prefix in sorted({g.split(":")[0] for g in sample.group}):
        mine = np.array([g.startswith(prefix + ":") for g in sample.group])
        answered = mine & (p >= gate)
        right = int(sample.y[answered].sum())
        top = mine & (p >= 0.9)
        print(
            f"  {prefix}: above the gate {int(answered.sum())} of {int(mine.sum())}, right {right};"
            f" right answers refused {int((sample.y[mine & (p < gate)]).sum())};"
            f" at >= 0.9: {int(top.sum())}, of which wrong {int(top.sum() - sample.y[top].sum())}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("reports", nargs="+", type=Path, help="report.json of each question set")
    parser.add_argument(
        "--gate",
        type=float,
        default=QuerySettings.model_fields["min_answer_confidence"].default,
        help="the not_found gate to describe (default: the service's)",
    )
    args = parser.parse_args()
    sample = load(args.reports)
    describe("shipped weights (as the service gave them)", sample.shipped, sample, args.gate)
    logits = held_out_logits(sample)
    describe("refit, held out (raw)", _sigmoid(logits), sample, args.gate)
    a, b = rescale(logits, sample)
    describe(f"refit, held out, rescaled (x {a:.3f} {b:+.3f})", _sigmoid(a * logits + b), sample, args.gate)
    beta = fit(sample.x, sample.y, sample.w)
    folded = a * beta
    folded[-1] += b
    describe("the weights below, on every reply (in sample)", _sigmoid(sample.x @ folded), sample, args.gate)
    print("\nweights for app/query/confidence.py (all of both sets, rescale folded in):")
    for name, value in zip(FEATURES, folded[:-1], strict=True):
        print(f'    "{name}": {value:.3f},')
    print(f"_BIAS = {folded[-1]:.3f}")


if __name__ == "__main__":
    main()
