"""The semantic answer cache: a paraphrase of a question an agent has just answered gets
the same answer without retrieval or a model call (docs/CONFIDENCE.md, "Semantic answer
cache").

The exact answer cache (AGENT_CONTEXT_SQL) only serves a question spelt the same way once
normalised. Callers rarely repeat each other word for word, so this one compares the
question's embedding (computed on every call anyway) with those of recent answered
questions of the same *scope*: organisation, agent, the content version of every KB the
agent reads, prompt variant and files, the settings that shape an answer, answerer and
embedding model. Any change to those is a new scope, so nothing stale can match.

What may be reused, and when:
- only replies that answered from the knowledge (never not_found, unavailable, a transfer
  or a degraded answer: ``QueryService._finish`` decides what is stored);
- only above a cosine similarity calibrated per embedder on callers-dev (0 wrong hits;
  ``python -m bench.semantic_cache_eval``); embedders not calibrated have it off;
- only when both questions name the same particulars: the same numbers, the same
  content words besides those that ask or fill, and both negated or neither (see
  ``same_particulars``), so "the price of a filling" never gets the price of a crown, nor
  "which days are you not open?" the open days.

It lives in each process's memory, bounded: a lookup is a matrix-vector product over at
most ``_PER_SCOPE`` vectors, no round trip. The scope is read from the database on every
call (the agent's context statement), so a change is heard by every process at once; the
hits themselves are per process (a paraphrase is served by the process that answered the
first question, or answered afresh elsewhere).
"""

from __future__ import annotations

import re
import time
import unicodedata
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from app.embeddings.base import embedder_family
from app.embeddings.lexical import lexical_terms

# Cosine similarity at or above which two questions of one scope are the same question,
# per embedder family, as calibrated (docs/BENCHMARKS.md, "Semantic answer cache"): minilm's
# is above the most similar pair of different callers-dev questions (0.79) by a margin, so
# similarity alone makes no wrong hit there, and the particulars check made none on the
# rewordings at any threshold from 0.70; it keeps 84 % of the true rewordings. Families
# absent here were not calibrated (OpenAI's vectors sit on another scale; no key offline)
# and have it off unless QUERY__SEMANTIC_CACHE_THRESHOLD sets one.
DEFAULT_THRESHOLDS = {"minilm": 0.85}
# Recent answered questions kept per scope, and in all (at 384 dimensions, 8,192 vectors
# take 12.6 MB as float32; at OpenAI's 1,536, 50 MB).
_PER_SCOPE = 256
_MAX_ENTRIES = 8192

_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_WORD = re.compile(r"[^\W\d_]+")
_TOKEN = re.compile(r"[^\W_]+")
# Spoken numbers are numbers: "a ten class pass" is "a 10 class pass", not "a five class pass".
_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)
_TENS = "thirty forty fifty sixty seventy eighty ninety"
_NUMBER_WORDS = {word: str(value) for value, word in enumerate(_UNITS.split())} | {
    word: str(10 * tens) for tens, word in enumerate(_TENS.split(), 3)
}
_ORDINALS = frozenset(("half", "quarter", "first", "second", "third", "fourth", "fifth"))
_ORDINALS |= {"hundred", "thousand", "million"}
# Words that ask or fill rather than name what is asked about: "how much is a filling" and
# "what does a filling cost" name the same thing, a filling. Everything else must agree.
_GENERIC = frozenset(
    lexical_terms(
        "much cost costs price prices pricing charge charges fee fees pay rate rates roughly "
        "usually typically tell know like need want get please thanks thank hi hello hey yeah "
        "um uh er okay ok just actually wondering wonder guys whos wheres whens hows whys"
    )
)
# Terms this long are compared by prefix: the light stemmer leaves "deliver" and "delivery".
_PREFIX = 4
# A question that negates may ask for the complement ("which days are you not open?"), yet
# its vector sits next to the plain question's and the stop-word-free terms are the same.
# Transcripts may drop the apostrophe ("dont", "isnt").
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nobody|nothing|neither|nor|without|cannot|except"
    r"|(?:ca|do|does|is|are|wo|was|were|did|have|has|had|should|would|could)nt)\b|n['’]t\b"
)


# Words that relate what is asked about to a time, a place or a direction, by the kind of
# relation: their stems are stop words to the lexical terms, yet "can I eat before the
# procedure?" and "... after the procedure?" sit at 0.96 and ask for opposite answers (so do
# check-in and check-out, the heating on and off, children under and over 12). See
# ``_same_relations``.
_RELATION_KINDS = {
    word: kind
    for kind, words in {
        "time": "before after during until till since past earlier later",
        "switch": "on off",
        "inside": "in out inside outside into",
        "level": "over under above below beyond within between",
        "vertical": "up down",
    }.items()
    for word in words.split()
}
# Who, where, when and why ask for different facts of one thing ("who is the manager?",
# "where is the manager?"); "what time" asks when.
_ASKS = {"who": "who", "whom": "who", "whose": "who", "where": "where", "when": "when", "why": "why"}
_WHAT_TIME = re.compile(r"\bwhat\s+time\b")
_TIME = lexical_terms("time")[0]
# "From the hotel to the airport" is not "from the airport to the hotel": the words after
# "from" and "to" are kept with them, past these.
_DETERMINERS = frozenset(
    {"the", "a", "an", "my", "your", "our", "their", "his", "her", "its", "this", "that"}
)


def default_threshold(setting: float | None, model_key: str) -> float | None:
    """The threshold in force: the setting when given (0 = off), else the embedder's
    calibrated one; None = off."""
    value = setting if setting is not None else DEFAULT_THRESHOLDS.get(embedder_family(model_key))
    return value if value else None


@dataclass(frozen=True, slots=True)
class Particulars:
    """What a question must share with a cached one to reuse its answer: its numbers and
    the content words that name what it asks about."""

    numbers: frozenset[str]
    terms: frozenset[str]
    negated: bool  # says "not", "no", "never", "can't"... (_NEGATION)
    relations: frozenset[str]  # "before", "on", "under"... (_RELATION_KINDS)
    asks: frozenset[str]  # "who", "where", "when", "why" (_ASKS)
    route: frozenset[tuple[str, str]]  # ("from", "hotel"), ("to", "airport")


def particulars(question: str) -> Particulars:
    text = unicodedata.normalize("NFKC", question).casefold()
    numbers = {n.replace(",", "") for n in _NUMBER.findall(text)}
    words = set(_WORD.findall(text))
    numbers |= {_NUMBER_WORDS[w] for w in words & _NUMBER_WORDS.keys()} | (words & _ORDINALS)
    spoken = set(_NUMBER_WORDS) | _ORDINALS
    terms = {t for t in lexical_terms(text) if not t.isdigit() and t not in spoken and t not in _GENERIC}
    if _WHAT_TIME.search(text):
        terms.discard(_TIME)  # "what time" asks when
    tokens = _TOKEN.findall(text)
    asks = {_ASKS[t] for t in tokens if t in _ASKS} | ({"when"} if _WHAT_TIME.search(text) else set())
    route: list[tuple[str, str]] = []
    if "from" in tokens:
        for i, token in enumerate(tokens):
            if token in ("from", "to"):
                route.append((token, next((t for t in tokens[i + 1 :] if t not in _DETERMINERS), "")))
    return Particulars(
        frozenset(numbers),
        frozenset(terms),
        _NEGATION.search(text) is not None,
        frozenset(t for t in tokens if t in _RELATION_KINDS),
        frozenset(asks),
        frozenset(route),
    )


def same_particulars(a: Particulars, b: Particulars) -> bool:
    """Whether two questions close in meaning may share an answer: the same numbers, both
    negated or neither, the same words of time, place and direction (``_same_relations``) and
    of asking (who, where, when, why), and the same content words besides the ones that ask or fill
    (``_GENERIC``). Similarity alone cannot tell "the price of a filling" from "the price of
    a crown", nor "which days are you open?" from "which days are you not open?": the
    sentences differ by the one word that matters. This costs the paraphrases that name the
    thing by another word ("plastic" for "card"), or that negate one side only ("isn't
    parking free?"): they are answered afresh."""
    # A question naming nothing ("how much is it?") cannot be checked: it never matches.
    if not a.terms or not b.terms or a.numbers != b.numbers or a.negated != b.negated:
        return False
    if a.asks != b.asks or not _same_route(a.route, b.route):
        return False
    if not _same_relations(a.relations, b.relations):
        return False
    return _covered(a.terms, b.terms) and _covered(b.terms, a.terms)


def _same_route(a: frozenset[tuple[str, str]], b: frozenset[tuple[str, str]]) -> bool:
    """The same places to come from ("to the airport" is not "from the airport", nor "from
    the hotel to the airport" "from the airport to the hotel"), and where both say where to,
    one's destinations among the other's (an infinitive's "to get" is no destination)."""
    if {p for p in a if p[0] == "from"} != {p for p in b if p[0] == "from"}:
        return False
    to_a, to_b = {p for p in a if p[0] == "to"}, {p for p in b if p[0] == "to"}
    return not (to_a and to_b) or to_a <= to_b or to_b <= to_a


def _same_relations(a: frozenset[str], b: frozenset[str]) -> bool:
    """The same words of time, place and direction, or one question leaving out words of a
    single kind the other has ("on which days are you open?", "which days are you open?").
    Words of one kind on both sides must agree ("before" and "after", "on" and "off"), and
    words left out on both sides of two kinds ("sign up", "sign out") differ."""
    differ = a ^ b
    if not differ:
        return True
    kinds = {_RELATION_KINDS[w] for w in differ}
    if len(kinds) > 1:
        return False
    (kind,) = kinds
    return not any(_RELATION_KINDS[w] == kind for w in a) or not any(_RELATION_KINDS[w] == kind for w in b)


def _covered(terms: frozenset[str], other: frozenset[str]) -> bool:
    return all(t in other or any(_same_stem(t, o) for o in other) for t in terms)


def _same_stem(a: str, b: str) -> bool:
    return min(len(a), len(b)) >= _PREFIX and (a.startswith(b) or b.startswith(a))


@dataclass(frozen=True, slots=True)
class Match:
    question: str
    similarity: float
    query_id: uuid.UUID
    reply: dict[str, Any]

    def debug(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "similarity": round(self.similarity, 4),
            "query_id": str(self.query_id),
        }


@dataclass(slots=True)
class _Entry:
    question: str
    particulars: Particulars
    query_id: uuid.UUID
    reply: dict[str, Any]
    stored_at: float


class _Scope:
    """One scope's recent answered questions, oldest first, and their vectors as rows."""

    def __init__(self, dimensions: int) -> None:
        self.entries: OrderedDict[str, _Entry] = OrderedDict()
        self.vectors: npt.NDArray[np.float32] = np.empty((0, dimensions), dtype=np.float32)

    def put(self, normalised: str, vector: npt.NDArray[np.float32], entry: _Entry) -> int:
        """Add or replace; returns how many entries the scope gained (0 or 1, less evictions)."""
        before = len(self.entries)
        keys = list(self.entries)
        rows = list(self.vectors)
        if normalised in self.entries:
            index = keys.index(normalised)
            del keys[index], rows[index]
            del self.entries[normalised]
        self.entries[normalised] = entry
        rows.append(vector)
        while len(self.entries) > _PER_SCOPE:
            self.entries.popitem(last=False)
            rows.pop(0)
        self.vectors = np.vstack(rows).astype(np.float32, copy=False)
        return len(self.entries) - before


class SemanticAnswerCache:
    """Per process: recent answered questions by scope, bounded (module docstring)."""

    def __init__(self, *, threshold: float | None, ttl_s: float) -> None:
        self.threshold = threshold
        self.ttl_s = ttl_s
        self._scopes: OrderedDict[tuple[Any, ...], _Scope] = OrderedDict()
        self._size = 0

    @property
    def enabled(self) -> bool:
        return self.threshold is not None and self.ttl_s > 0

    def lookup(self, scope: tuple[Any, ...], normalised: str, vector: Sequence[float]) -> Match | None:
        """The cached answer of the closest question of the scope above the threshold whose
        particulars agree, if any. The question itself never matches: a repeat is the exact
        cache's (which debug mode bypasses on purpose)."""
        held = self._scopes.get(scope)
        if held is None or self.threshold is None:
            return None
        self._scopes.move_to_end(scope)
        similarities = held.vectors @ np.asarray(vector, dtype=np.float32)
        order = np.flatnonzero(similarities >= self.threshold)
        if not order.size:
            return None
        mine: Particulars | None = None
        oldest = time.monotonic() - self.ttl_s
        entries = list(held.entries.items())
        for index in order[np.argsort(-similarities[order], kind="stable")]:
            key, entry = entries[index]
            if key == normalised or entry.stored_at < oldest:
                continue
            mine = mine or particulars(normalised)
            if same_particulars(mine, entry.particulars):
                return Match(entry.question, float(similarities[index]), entry.query_id, entry.reply)
        return None

    def store(
        self,
        scope: tuple[Any, ...],
        normalised: str,
        vector: Sequence[float],
        *,
        query_id: uuid.UUID,
        reply: dict[str, Any],
    ) -> None:
        """Keep an answered reply (the caller decides which replies qualify)."""
        row = np.asarray(vector, dtype=np.float32)
        held = self._scopes.get(scope)
        if held is None:
            held = self._scopes[scope] = _Scope(row.shape[0])
        self._scopes.move_to_end(scope)
        entry = _Entry(normalised, particulars(normalised), query_id, dict(reply), time.monotonic())
        self._size += held.put(normalised, row, entry)
        # A KB's new content version leaves its old scopes behind: the least recently used go.
        while self._size > _MAX_ENTRIES and len(self._scopes) > 1:
            _, gone = self._scopes.popitem(last=False)
            self._size -= len(gone.entries)


def scope_of(org_id: uuid.UUID, agent_id: uuid.UUID, ctx: Any, *answering: str) -> tuple[Any, ...]:
    """A call's scope: what the exact cache key binds besides the question (the agent's
    context row: its KBs and their content versions, the prompt variant, attribution, the
    documents the call's filters and the validity windows hide; and ``answering``: prompt and
    settings fingerprint, answerer, embedding model)."""
    return (
        org_id,
        agent_id,
        tuple(ctx["kb_ids"]),
        tuple(ctx["kb_versions"]),
        ctx["variant"],
        ctx["attribution"],
        tuple(ctx["hidden_documents"] or ()),
        *answering,
    )
