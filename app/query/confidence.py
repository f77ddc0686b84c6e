"""The confidence of an answer chosen by meaning: the estimated chance that it is right.

A logistic regression over what the answerer saw when it chose its sentence, fitted on every
reply of callers-dev (242 questions) and squad-dev (6,814) together, each set weighing the
same, where "right" means the spoken answer conveys the gold answer (every gold answer, for
callers-dev) and any answer to an unanswerable question is wrong. Refitted when sentences
began to be read inside their chunks (thirty-sixth session): held out (callers-dev by
organisation, squad-dev by document) it scored Brier 0.208 (0.212 for the fit before, on the
replies before); its logit was then rescaled once on those held-out predictions (× 0.82,
− 0.045, folded into the weights) because the raw fit over-states its top range.
docs/CONFIDENCE.md has the gate table and what a voice runtime can do with it.

The features, all of the best sentence unless said:
- ``match``: its raw score (extractive._semantic_score: meaning, heading, words, fact asked);
- ``margin``: how far ahead of the runner-up sentence it is (capped at 0.3);
- ``similarity``, ``heading_similarity``: its and its heading's cosine with the question;
- ``support``: the share of the question's words it covers (IDF-weighted);
- ``has_wanted``: 1 when it holds the kind of fact asked for (a price, a time), else 0;
- ``no_amount``: 1 when a price is asked and it names no amount of money (the near miss
  "we offer a one-visit whitening treatment" for "how much is whitening?"), else 0;
- ``lead``: 1 / (1 + the retrieval rank of its passage);
- ``vector_lead``: 1 / its passage's rank among the nearest vectors by the chunk's own vector
  (``cosine_rank``: before the best-sentence term reorders them; 0 when not among them): a
  sentence from the passage nearest in meaning is right more often. Read after that term, the
  rank echoed the answerer's own best sentence, and near misses to unanswerable questions rose
  with it (callers-dev's related ones refused 0.690 against 0.897; docs/BENCHMARKS.md);
- ``spread``: how far its cosine stands above the mean cosine of every sentence read; with
  ``similarity``'s negative weight, the mean of the others counts against it: the best of
  many sentences that all relate is a weaker answer than one that stands out;
- ``low_match``: how far ``match`` falls under _LOW_MATCH, so that an off-topic question,
  whose best sentence stands out only because the rest are further still, is not lifted.

An answer the subject check finds certainly about something else (``off_subject``: a filling's
price for "how much are implants?") gets 0 whatever the features say; fitted as a feature
instead, it touched too few replies to earn a weight (docs/CONFIDENCE.md).
"""

from __future__ import annotations

import math

from app.answering.extractive import ExtractiveAnswer

__all__ = ["FEATURES", "calibrated_confidence"]

_WEIGHTS = {
    "match": 2.547,
    "margin": 0.944,
    "similarity": -2.715,
    "heading_similarity": 0.476,
    "support": -0.517,
    "has_wanted": 0.253,
    "lead": -0.069,
    "vector_lead": 0.842,
    "spread": 3.148,
    "low_match": -4.788,
    "no_amount": -1.874,
}
_BIAS = -2.078
# The features in the order bench/calibrate.py fits them (it prints the weights to paste here).
FEATURES: tuple[str, ...] = tuple(_WEIGHTS)
# Below this match a sentence is a stretch whatever else speaks for it: off-topic
# questions land here, with every sentence far from them and the best one standing out
# only because the rest are further still.
_LOW_MATCH = 0.45
_MARGIN_CAP = 0.3


def calibrated_confidence(
    evidence: ExtractiveAnswer | None, vector_rank: int | None
) -> tuple[float, dict[str, float]]:
    """The confidence (0..1) and the features it came from (shown with ``debug=true``);
    ``vector_rank`` is the chosen passage's rank by its own vector (Candidate.cosine_rank)."""
    if evidence is None or evidence.match is None:
        return 0.0, {"confidence": 0.0}
    if evidence.off_subject:
        # Certainly about something else (extractive._off_subject): never worth speaking.
        return 0.0, {"off_subject": 1.0, "confidence": 0.0}
    features = {
        "match": evidence.match,
        "margin": min(evidence.margin, _MARGIN_CAP),
        "similarity": evidence.similarity,
        "heading_similarity": evidence.heading_similarity,
        "support": evidence.support,
        "has_wanted": float(evidence.has_wanted),
        "lead": 1.0 / (1 + evidence.passage_index),
        "vector_lead": 1.0 / vector_rank if vector_rank else 0.0,
        "spread": evidence.spread,
        "low_match": max(0.0, _LOW_MATCH - evidence.match),
        "no_amount": float(evidence.wants == "price" and not evidence.has_wanted),
    }
    logit = _BIAS + sum(_WEIGHTS[name] * value for name, value in features.items())
    value = round(1.0 / (1.0 + math.exp(-logit)), 4)
    return value, {**features, "confidence": value}
