"""The confidence of an answer chosen by meaning: the estimated chance that it is right.

A logistic regression over what the answerer saw when it chose its sentence, fitted on
callers-dev (242 questions) and a 2,500-question sample of squad-dev together, each set
weighing the same, where "right" means the spoken answer conveys the gold answer (every gold
answer, for callers-dev) and any answer to an unanswerable question is wrong. Fitted on one
half of the rows, it scored the other half as well (Brier 0.215 on the held-out half).
docs/CONFIDENCE.md has the reliability tables and what a voice runtime can do with it.

The features, all of the best sentence unless said:
- ``match``: its raw score (extractive._semantic_score: meaning, heading, words, fact asked);
- ``margin``: how far ahead of the runner-up sentence it is (capped at 0.3);
- ``similarity``, ``heading_similarity``: its and its heading's cosine with the question;
- ``support``: the share of the question's words it covers (IDF-weighted);
- ``has_wanted``: 1 when it holds the kind of fact asked for (a price, a time), else 0;
- ``lead``: 1 / (1 + the retrieval rank of its passage);
- ``vector_lead``: 1 / its passage's rank among the nearest vectors (0 when not among them):
  a sentence from the passage nearest in meaning is right more often (this feature alone
  moved callers-dev's unanswerable_related refused from 0.62 to 0.79 at a like gate).
"""

from __future__ import annotations

import math

from app.answering.extractive import ExtractiveAnswer

__all__ = ["calibrated_confidence"]

_WEIGHTS = {
    "match": 1.9,
    "margin": 0.839,
    "similarity": 0.417,
    "heading_similarity": 0.617,
    "support": -0.243,
    "has_wanted": 0.732,
    "lead": 0.147,
    "vector_lead": 1.171,
}
_BIAS = -3.625
_MARGIN_CAP = 0.3


def calibrated_confidence(
    evidence: ExtractiveAnswer | None, vector_rank: int | None
) -> tuple[float, dict[str, float]]:
    """The confidence (0..1) and the features it came from (shown with ``debug=true``);
    ``vector_rank`` is the chosen passage's rank on the vector side of retrieval."""
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
        "vector_lead": 1.0 / vector_rank if vector_rank else 0.0,
    }
    logit = _BIAS + sum(_WEIGHTS[name] * value for name, value in features.items())
    value = round(1.0 / (1.0 + math.exp(-logit)), 4)
    return value, {**features, "confidence": value}
