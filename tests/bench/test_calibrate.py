"""bench.calibrate: the refit of the offline default's confidence from two `vk eval` reports."""

import json
from pathlib import Path

import numpy as np

from app.answering.extractive import ExtractiveAnswer
from app.query.confidence import FEATURES, calibrated_confidence
from bench import calibrate


def _parts(**overrides: float) -> dict[str, float]:
    parts = dict.fromkeys(FEATURES, 0.0)
    parts.update(overrides)
    parts.setdefault("confidence", 0.5)
    return parts


def _row(doc: str, answerable: bool, status: str, correct: bool | None, parts: dict | None, **extra) -> dict:
    return {
        "doc": doc,
        "answerable": answerable,
        "status": status,
        "correct": correct,
        "confidence_parts": parts,
        **extra,
    }


def _write(path: Path, rows: list[dict]) -> Path:
    path.mkdir(parents=True)
    report = path / "report.json"
    report.write_text(json.dumps({"rows": rows}))
    return report


def test_load_labels_weighs_each_set_the_same_and_groups_by_organisation_or_document_half(tmp_path):
    callers = _write(
        tmp_path / "callers",
        [
            _row("a/x.md", True, "answered", True, _parts(match=0.7), org="a"),
            _row("b/y.md", True, "not_found", False, _parts(match=0.2), org="b"),
            # Answered, but the question has no answer: wrong.
            _row("b/y.md", False, "answered", None, _parts(match=0.5), org="b"),
            # Refused by the subject check: no features, left out.
            _row("a/x.md", True, "answered", False, {"off_subject": 1.0, "confidence": 0.0}, org="a"),
        ],
    )
    squad = _write(
        tmp_path / "squad",
        [
            _row("Apollo.md", True, "answered", True, _parts(match=0.9)),
            _row("Zebra.md", True, "answered", False, _parts(match=0.4)),
        ],
    )
    sample = calibrate.load([callers, squad])
    assert sample.y.tolist() == [1.0, 0.0, 0.0, 1.0, 0.0]
    assert np.allclose(sample.w, [1 / 3, 1 / 3, 1 / 3, 1 / 2, 1 / 2])
    assert sample.group == ["callers:a", "callers:b", "callers:b", "squad:a", "squad:b"]
    # The match column, then 1 for the bias.
    assert sample.x[:, FEATURES.index("match")].tolist() == [0.7, 0.2, 0.5, 0.9, 0.4]
    assert sample.x[:, -1].tolist() == [1.0] * 5


def test_fit_recovers_the_weights_a_logistic_outcome_was_drawn_with():
    rng = np.random.default_rng(7)
    x = np.column_stack([rng.normal(size=20_000), rng.normal(size=20_000), np.ones(20_000)])
    truth = np.array([1.5, -0.8, -0.4])
    y = (rng.random(20_000) < 1 / (1 + np.exp(-(x @ truth)))).astype(float)
    beta = calibrate.fit(x, y, np.full(20_000, 1 / 20_000))
    assert np.allclose(beta, truth, atol=0.1), beta


def test_held_out_logits_of_a_group_come_from_a_fit_without_it():
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.normal(size=300), np.ones(300)])
    y = (rng.random(300) < 1 / (1 + np.exp(-2 * x[:, 0]))).astype(float)
    groups = ["s:a"] * 100 + ["s:b"] * 100 + ["s:c"] * 100
    sample = calibrate.Sample(x, y, np.full(300, 1 / 300), groups, np.zeros(300))
    logits = calibrate.held_out_logits(sample)
    without_b = calibrate.fit(
        np.delete(x, np.s_[100:200], 0), np.delete(y, np.s_[100:200]), np.full(200, 1 / 300)
    )
    assert np.allclose(logits[100:200], x[100:200] @ without_b)


def test_the_features_are_the_ones_the_service_computes():
    evidence = ExtractiveAnswer(text="We open at 9 am.", support=0.5, passage_index=0, match=0.6)
    _, parts = calibrated_confidence(evidence, vector_rank=1)
    assert set(FEATURES) == set(parts) - {"confidence"}
