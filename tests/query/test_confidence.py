"""The calibrated confidence of an answer chosen by meaning (app/query/confidence.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from app.answering.extractive import ExtractiveAnswer
from app.query.confidence import calibrated_confidence

# A right answer to a caller's price question, as the answerer reports it.
EVIDENCE = ExtractiveAnswer(
    text="Teeth whitening in the chair costs 350 dollars.",
    support=0.37,
    passage_index=0,
    match=0.88,
    margin=0.3,
    similarity=0.62,
    heading_similarity=0.25,
    wants="price",
    has_wanted=True,
    spread=0.44,
)


def test_the_confidence_is_the_logistic_of_the_weighted_features() -> None:
    value, parts = calibrated_confidence(EVIDENCE, vector_rank=1)
    logit = (
        -2.078
        + 2.547 * 0.88
        + 0.944 * 0.3
        - 2.715 * 0.62
        + 0.476 * 0.25
        - 0.517 * 0.37
        + 0.253 * 1.0
        - 0.069 * 1.0
        + 0.842 * 1.0
        + 3.148 * 0.44
    )
    assert value == pytest.approx(1 / (1 + math.exp(-logit)), abs=1e-4)
    assert value == pytest.approx(0.75, abs=0.01)
    assert parts["spread"] == 0.44
    assert parts["low_match"] == 0.0
    assert parts["no_amount"] == 0.0
    assert parts["confidence"] == value


def test_a_sentence_that_stands_out_from_the_rest_is_more_likely_right() -> None:
    flat = dataclasses.replace(EVIDENCE, spread=0.1)
    assert calibrated_confidence(flat, 1)[0] < calibrated_confidence(EVIDENCE, 1)[0] - 0.15


def test_a_weak_match_is_held_down_whatever_stands_out() -> None:
    at_the_line = dataclasses.replace(EVIDENCE, match=0.45, similarity=0.2, spread=0.18)
    weak = dataclasses.replace(at_the_line, match=0.25)
    value, parts = calibrated_confidence(weak, 1)
    assert parts["low_match"] == pytest.approx(0.2)
    # match's own weight lowers it by 0.42 on the logit, low_match by 0.38 more
    assert value < calibrated_confidence(at_the_line, 1)[0] - 0.15
    assert value < 0.39  # under the gate


def test_a_price_question_answered_without_an_amount_is_less_likely_right() -> None:
    without = dataclasses.replace(EVIDENCE, has_wanted=False)
    value, parts = calibrated_confidence(without, 1)
    assert parts["no_amount"] == 1.0
    assert value < calibrated_confidence(EVIDENCE, 1)[0] - 0.2
    # Another kind of fact missing is already counted in match: nothing more is taken off.
    when = dataclasses.replace(without, wants="time")
    assert calibrated_confidence(when, 1)[1]["no_amount"] == 0.0


def test_no_sentence_means_no_confidence() -> None:
    assert calibrated_confidence(None, None) == (0.0, {"confidence": 0.0})
    by_words = dataclasses.replace(EVIDENCE, match=None)
    assert calibrated_confidence(by_words, 1) == (0.0, {"confidence": 0.0})


def test_an_answer_certainly_about_another_subject_gets_no_confidence() -> None:
    # Everything else speaks for it (above the gate) but the check is certain: refused.
    assert calibrated_confidence(EVIDENCE, 1)[0] > 0.39
    off = dataclasses.replace(EVIDENCE, off_subject=True)
    assert calibrated_confidence(off, 1) == (0.0, {"off_subject": 1.0, "confidence": 0.0})
