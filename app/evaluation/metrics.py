"""Metric functions of the evaluation: pure, small, and tested with hand-made numbers.

Retrieval: a question's *gold rank* is the 1-based rank of the first retrieved chunk that
holds its gold paragraph (see ``GoldPassage``); hit@k and MRR@k are computed from those
ranks over the answerable questions.

Answers: *contains gold* is the share of answerable questions answered with a spoken
answer that contains a gold answer, ignoring case and spacing, in its written form
("90%") or in the form the speech shaping gives it ("90 percent"). A callers-dev question
needs all of its gold answers, each found on whole tokens (``contains_all_gold``).
*Token F1* is the SQuAD measure (lower case, punctuation and articles removed) against
the best gold answer.

Confidence: answered replies are binned by their ``confidence`` (``reliability``) and the
share right in each bin shows whether the number means what it says.

not_found: the positive class is ``not_found``. Precision is the share of ``not_found``
replies that were right (the question is unanswerable); recall is the share of
unanswerable questions that got ``not_found``.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.answering.speech import SERVICE_NUMBERS, make_speakable

__all__ = [
    "CONFIDENCE_EDGES",
    "EMBEDDING_PRICE_PER_M",
    "HIGH_CONFIDENCE",
    "LLM_INPUT_PRICE_PER_M",
    "LLM_OUTPUT_PRICE_PER_M",
    "SPLIT_PREFIX_CHARS",
    "GoldPassage",
    "NotFoundScores",
    "ReliabilityBin",
    "answer_sentence",
    "answer_tokens",
    "best_f1",
    "comparable",
    "contains_all_gold",
    "contains_gold",
    "first_gold_rank",
    "hit_at_k",
    "llm_prices",
    "model_costs",
    "mrr_at_k",
    "normalise_space",
    "not_found_scores",
    "percentile",
    "reliability",
    "spoken_forms",
    "squad_normalise",
    "token_f1",
    "tokens_by_model",
]

# Prices in US dollars per million tokens (input, output), as OpenAI listed them when this
# was written; a dated snapshot ("gpt-4o-mini-2024-07-18") costs what its model does. Change
# them here when the price list changes: a model not listed is reported without a cost,
# never at another model's price.
LLM_PRICES_PER_M: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
}
DEFAULT_LLM_MODEL = "gpt-4o-mini"
LLM_INPUT_PRICE_PER_M, LLM_OUTPUT_PRICE_PER_M = LLM_PRICES_PER_M[DEFAULT_LLM_MODEL]
# text-embedding-3-small.
EMBEDDING_PRICE_PER_M = 0.02
_SNAPSHOT_RE = re.compile(r"-\d{4}-\d{2}-\d{2}$")

# How much of a paragraph's start identifies it when the paragraph is split over chunks.
SPLIT_PREFIX_CHARS = 200

# Lower edges of the reliability table's confidence bins; the last bin is [0.9, 1.0].
CONFIDENCE_EDGES = (0.0, 0.5, 0.7, 0.8, 0.9)
# The confidence from which a voice runtime may speak an answer without hedging: issue 17
# asks that answers at or above it be right at least 95 % of the time.
HIGH_CONFIDENCE = 0.9

_SPACES = re.compile(r"\s+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)
# A sentence ends at . ! ? or … (optionally followed by a closing quote or bracket) before
# whitespace: the same places where the chunker may cut a paragraph that is too long.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*(?=\s)")
_TRAILING_STOP = re.compile(r"[\s.!?…]+$")
# A token is a word with its inner dots, commas, colons, apostrophes, slashes and hyphens
# ("7:30", "1,350", "2.50", "x-rays"), or one other visible character ("$", "%", "(").
# So "$26" is ["$", "26"] and never matches inside "$265" or "$26.50".
_TOKEN = re.compile(r"\w+(?:[.,:'/-]\w+)*|[^\w\s]")
# Typographic quotes as typed ones: "hours’ notice" is "hours' notice".
_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"'})


def normalise_space(text: str) -> str:
    """Collapse every run of whitespace to one space and trim the ends."""
    return _SPACES.sub(" ", text).strip()


def comparable(text: str) -> str:
    """Text as compared for gold-paragraph containment: NFKC, no invisible format
    characters (zero-width spaces and joiners, which document extraction drops), and
    whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text)
    return normalise_space("".join(ch for ch in text if unicodedata.category(ch) != "Cf"))


def squad_normalise(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return normalise_space(_ARTICLES.sub(" ", text))


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD token F1 between two texts (bag of normalised words)."""
    predicted = squad_normalise(prediction).split()
    expected = squad_normalise(gold).split()
    if not predicted or not expected:
        # SQuAD's rule: two empty answers agree, one empty answer scores nothing.
        return float(predicted == expected)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision = common / len(predicted)
    recall = common / len(expected)
    return 2 * precision * recall / (precision + recall)


def best_f1(prediction: str, golds: Iterable[str]) -> float:
    """Token F1 against the gold answer it matches best (0 when there is none)."""
    return max((token_f1(prediction, gold) for gold in golds), default=0.0)


_ZIP_CODE = re.compile(r"\d{5}")
# Forms the speech shaping gives only in context, as an answer holds them: a service number
# after "call" ("nine nine nine"), a reference after "number" ("five eight four zero one
# seven"), a time with a dot after "until" ("9:30").
_SERVICE_NUMBER = re.compile(SERVICE_NUMBERS)
_DIGIT_RUN = re.compile(r"\d{5,}")
_DOT_TIME = re.compile(r"\b\d{1,2}\.[0-5]\d\b")


def spoken_forms(gold: str) -> list[str]:
    """The gold answer as written and as the speech shaping would say it, lower-cased.

    ``make_speakable`` ends its output with sentence punctuation; that stop is not part
    of the answer and is dropped, or "90 percent." would never be found mid-sentence.
    """
    written = normalise_space(gold).casefold()
    forms = [written, _said(gold)]
    if sum(c.isdigit() for c in gold) >= 7:
        # In an answer the digits may follow a word that makes them a phone number ("call
        # 1300 123 456"), read digit by digit, where the gold alone stays digits.
        forms.append(_said(gold, after="Call"))
    elif _ZIP_CODE.fullmatch(gold.strip()):
        # After a state ("Portland, ME 04101") a ZIP code is said digit by digit.
        forms.append(_said(gold.strip(), after="ZIP"))
    if _SERVICE_NUMBER.fullmatch(gold.strip()):
        forms.append(_said(gold.strip(), after="Call"))
    elif _DIGIT_RUN.fullmatch(gold.strip()):
        forms.append(_said(gold.strip(), after="number"))
    if _DOT_TIME.search(gold):
        forms.append(_said(gold, after="until"))
    return [form for form in dict.fromkeys(forms) if form]


def _said(text: str, after: str = "") -> str:
    """How the speech shaping says ``text``, lower-cased, without its closing stop; with
    ``after``, as it says it after that word (the word itself left out)."""
    spoken = normalise_space(make_speakable(f"{after} {text}" if after else text)).casefold()
    return _TRAILING_STOP.sub("", spoken.removeprefix(f"{after.casefold()} ") if after else spoken)


def contains_gold(answer: str, golds: Iterable[str]) -> bool:
    """Whether the spoken answer contains any gold answer, written or spoken, ignoring case."""
    said = normalise_space(answer).casefold()
    return any(form in said for gold in golds for form in spoken_forms(gold))


def answer_tokens(text: str) -> list[str]:
    """Whole tokens of a text as compared by ``contains_all_gold``: NFKC, case-folded."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold())


def _has_run(tokens: Sequence[str], run: Sequence[str]) -> bool:
    width = len(run)
    return width > 0 and any(tokens[i : i + width] == run for i in range(len(tokens) - width + 1))


def contains_all_gold(answer: str, golds: Iterable[str]) -> bool:
    """Whether the spoken answer conveys every gold answer, each written or spoken, as a run
    of whole tokens (callers-dev's rule); False when there is no gold answer at all."""
    said = answer_tokens(answer)
    checks = [any(_has_run(said, answer_tokens(form)) for form in spoken_forms(gold)) for gold in golds]
    return bool(checks) and all(checks)


def answer_sentence(paragraph: str, answers: Iterable[str]) -> str | None:
    """The sentence(s) of ``paragraph`` around the first occurrence of a gold answer.

    The dataset gives no answer offsets, so the first occurrence of the first answer
    found in the paragraph (exact case first, then any case) stands in for it. An answer
    that crosses a sentence end returns every sentence it touches.
    """
    text = normalise_space(paragraph)
    for answer in answers:
        needle = normalise_space(answer)
        if not needle:
            continue
        start = text.find(needle)
        if start < 0:
            start = text.casefold().find(needle.casefold())
        if start < 0:
            continue
        end = start + len(needle)
        begin = 0
        finish = len(text)
        for match in _SENTENCE_END.finditer(text):
            if match.end() <= start:
                begin = match.end()
            elif match.end() >= end:
                finish = match.end()
                break
        return text[begin:finish].strip()
    return None


@dataclass(frozen=True, slots=True)
class GoldPassage:
    """What makes a retrieved chunk count as holding a question's gold paragraph.

    The rule: the chunk comes from the gold document and contains the gold paragraph's
    text, compared after ``comparable`` (NFKC, invisible characters dropped, whitespace
    collapsed). A paragraph longer than the knowledge
    base's chunk size (counted in the chunker's tokens) is necessarily split over several
    chunks; then a chunk of the gold document also counts when it contains the
    paragraph's sentence that holds the gold answer, or the paragraph's first 200
    characters. ``anchors`` holds those two texts for a split paragraph and is empty
    otherwise.
    """

    document_id: str | None
    paragraph: str
    anchors: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        document_id: str | None,
        paragraph: str,
        answers: Sequence[str],
        *,
        paragraph_tokens: int,
        chunk_tokens: int,
    ) -> GoldPassage:
        """The gold passage of one question; ``paragraph_tokens`` is the paragraph's size."""
        text = comparable(paragraph)
        if paragraph_tokens <= chunk_tokens:
            return cls(document_id, text)
        anchors = [text[:SPLIT_PREFIX_CHARS].strip()]
        sentence = answer_sentence(text, answers)
        if sentence:
            anchors.append(sentence)
        return cls(document_id, text, tuple(dict.fromkeys(anchors)))

    def matches(self, document_id: str, chunk_text: str) -> bool:
        """Whether one retrieved chunk holds this gold paragraph."""
        if self.document_id is None or document_id != self.document_id:
            return False
        chunk = comparable(chunk_text)
        return self.paragraph in chunk or any(anchor in chunk for anchor in self.anchors)


def first_gold_rank(flags: Iterable[bool]) -> int | None:
    """1-based rank of the first gold chunk in a ranking of gold/not-gold flags."""
    for rank, is_gold in enumerate(flags, start=1):
        if is_gold:
            return rank
    return None


def hit_at_k(ranks: Sequence[int | None], k: int) -> float | None:
    """Share of questions whose gold rank is at most ``k``; None for no questions."""
    if not ranks:
        return None
    return sum(1 for rank in ranks if rank is not None and rank <= k) / len(ranks)


def mrr_at_k(ranks: Sequence[int | None], k: int = 10) -> float | None:
    """Mean reciprocal gold rank, counting ranks beyond ``k`` (and misses) as 0."""
    if not ranks:
        return None
    return sum(1 / rank for rank in ranks if rank is not None and rank <= k) / len(ranks)


@dataclass(frozen=True, slots=True)
class NotFoundScores:
    """Precision and recall of ``not_found`` replies, with the counts behind them."""

    true_positives: int
    false_positives: int
    false_negatives: int

    @property
    def precision(self) -> float | None:
        said = self.true_positives + self.false_positives
        return self.true_positives / said if said else None

    @property
    def recall(self) -> float | None:
        unanswerable = self.true_positives + self.false_negatives
        return self.true_positives / unanswerable if unanswerable else None


@dataclass(frozen=True, slots=True)
class ReliabilityBin:
    """Answered replies whose confidence is in ``[low, high)`` (``[low, 1.0]`` for the last)."""

    low: float
    high: float
    answered: int
    right: int

    @property
    def share_right(self) -> float | None:
        return self.right / self.answered if self.answered else None


def reliability(
    outcomes: Iterable[tuple[float, bool]], edges: Sequence[float] = CONFIDENCE_EDGES
) -> list[ReliabilityBin]:
    """Bin ``(confidence, right)`` pairs of answered replies by confidence.

    A confidence below the first edge falls in the first bin, one above 1.0 in the last:
    every answer is counted once.
    """
    bounds = [*edges, 1.0]
    answered = [0] * len(edges)
    right = [0] * len(edges)
    for confidence, is_right in outcomes:
        index = sum(1 for edge in edges[1:] if confidence >= edge)
        answered[index] += 1
        right[index] += is_right
    return [ReliabilityBin(bounds[i], bounds[i + 1], answered[i], right[i]) for i in range(len(edges))]


def not_found_scores(outcomes: Iterable[tuple[bool, str]]) -> NotFoundScores:
    """Score ``(answerable, status)`` pairs; ``unavailable`` counts as not saying not_found."""
    tp = fp = fn = 0
    for answerable, status in outcomes:
        said_not_found = status == "not_found"
        if said_not_found and not answerable:
            tp += 1
        elif said_not_found:
            fp += 1
        elif not answerable:
            fn += 1
    return NotFoundScores(tp, fp, fn)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) with linear interpolation between closest ranks.

    The same definition as numpy's default, so figures can be checked with it.
    """
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError("q must be between 0 and 100")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def llm_prices(model: str | None) -> tuple[float, float] | None:
    """A model's (input, output) dollars per million tokens; None when not listed."""
    name = model or DEFAULT_LLM_MODEL
    return LLM_PRICES_PER_M.get(name) or LLM_PRICES_PER_M.get(_SNAPSHOT_RE.sub("", name))


def tokens_by_model(
    replies: Iterable[tuple[str | None, int, int]], calls: int
) -> dict[str, tuple[float, float]]:
    """Prompt and completion tokens per call, by the model that used them, from each reply's
    (model, prompt tokens, completion tokens); a reply naming no model was the default's."""
    by_model: dict[str, tuple[float, float]] = {}
    for model, prompt, completion in replies:
        if prompt or completion:
            name = model or DEFAULT_LLM_MODEL
            before = by_model.get(name, (0.0, 0.0))
            by_model[name] = (before[0] + prompt / calls, before[1] + completion / calls)
    return by_model


def model_costs(
    by_model: Mapping[str, tuple[float, float]], embedding_tokens: float
) -> dict[str, float | None]:
    """Dollars per 1,000 calls, split into model and embedding, from the model tokens per
    call by the model that used them (each at its own price) and the embedding tokens per
    call; the model's part (and the total) None when a model used has no listed price."""
    llm: float | None = 0.0
    for model, (prompt, completion) in by_model.items():
        prices = llm_prices(model)
        if prices is None:
            if prompt or completion:
                llm = None
            continue
        if llm is not None:
            llm += 1000 * (prompt * prices[0] + completion * prices[1]) / 1e6
    embedding = 1000 * embedding_tokens * EMBEDDING_PRICE_PER_M / 1e6
    return {"llm": llm, "embedding": embedding, "total": None if llm is None else llm + embedding}
