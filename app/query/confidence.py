"""The confidence of an answer chosen by meaning: the estimated chance that it is right.

A logistic regression over what the answerer saw when it chose its sentence, fitted on
callers-dev (242 questions) and a 2,500-question sample of squad-dev together, each set
weighing the same, where "right" means the spoken answer conveys the gold answer (every gold
answer, for callers-dev) and any answer to an unanswerable question is wrong. Fitted on one
half of the rows, it scored the other half as well (Brier 0.220 on the held-out half).
docs/CONFIDENCE.md has the reliability tables and what a voice runtime can do with it.

The features, all of the best sentence unless said:
- ``match``: its raw score (extractive._semantic_score: meaning, heading, words, fact asked);
- ``margin``: how far ahead of the runner-up sentence it is (capped at 0.3);
- ``similarity``, ``heading_similarity``: its and its heading's cosine with the question;
- ``support``: the share of the question's words it covers (IDF-weighted);
- ``has_wanted``: 1 when it holds the kind of fact asked for (a price, a time), else 0;
- ``lead``: 1 / (1 + the retrieval rank of its passage).
"""

from __future__ import annotations

import math

from app.answering.extractive import ExtractiveAnswer

__all__ = ["calibrated_confidence"]

_WEIGHTS = {
    "match": 2.146,
    "margin": 0.732,
    "similarity": 0.601,
    "heading_similarity": 0.8,
    "support": -0.589,
    "has_wanted": 0.628,
    "lead": 0.815,
}
_BIAS = -3.407
_MARGIN_CAP = 0.3


def calibrated_confidence(evidence: ExtractiveAnswer | None) -> tuple[float, dict[str, float]]:
    """The confidence (0..1) and the features it came from (shown with ``debug=true``)."""
    if evidence is None or evidence.match is None:
        return 0.0, {"confidence": 0.0}
    features = {
        "match": evidence.match,
        "margin": min(evidence.margin, _MARGIN_CAP),
        "similarity": evidence.similarity,
        "heading_similarity": evidence.heading_similarity,
        "support": evidence.support,
        "has_wanted": float(evidence.has_wanted),
        "lead": 1.0 / (1 + evidence.passage_index),
    }
    logit = _BIAS + sum(_WEIGHTS[name] * value for name, value in features.items())
    value = round(1.0 / (1.0 + math.exp(-logit)), 4)
    return value, {**features, "confidence": value}
