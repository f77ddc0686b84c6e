"""Checks of the answering model's text before it is spoken: an answer that only declines,
in its own words; one that is data or code rather than speech; one that names a number
none of the passages it was given holds (a price cut or made up is a wrong one); and one
that repeats its instructions."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["declines", "echoes", "is_not_speech", "numbers_not_in"]

# A reply that only declines ("Sorry, I don't know.", "I'm sorry, but I can't assist with
# that request.", "Not found."): one short sentence opening with it and going no further.
# "I don't have the Saturday hours, but on weekdays we open at 9" answers what it can.
_DECLINES_RE = re.compile(
    r"^\W*(?:not[\s_-]*found\W*$"
    r"|(?:(?:i'?m|i am)\s+)?(?:(?:so\s+)?sorry|afraid|unfortunately)?[\s,.!]*(?:but\s*,?\s*)?"
    r"i\s*(?:do\s*not|don'?t|cannot|can'?t|can\s+not|am\s+unable\s+to|'?m\s+unable\s+to|am\s+not\s+able\s+to"
    r"|have\s+no)\s+(?:know|have\s+(?:that|this|any|the|enough|such)\b|information|find|help|assist|answer"
    r"|say|tell|provide|see|access))",
    re.IGNORECASE,
)
_GOES_ON_RE = re.compile(r"\b(?:but|however|although|though|except|yet)\b|[;:]|[.!?]\s+\S", re.IGNORECASE)
_MAX_DECLINING_WORDS = 20
# Data or code where speech was asked for: a JSON object or list of strings or objects,
# a code fence. "[1] The office opens at 9" is a citation mark, not data.
_NOT_SPEECH_RE = re.compile(r'^\s*(?:\{\s*"|\[\s*(?:"|\{|\[)|```|~~~)')
# A number as written: digits of any script, thousands grouped by "," (or, in a source,
# "." or a space: "1.650 €", "1 650 €"), a decimal part.
_NUMBER_RE = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_GROUPED_RE = re.compile(r"\d{1,3}(?:[. ]\d{3})+(?!\d)")
_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "thousand": 1000, "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
    "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "noon": 12,
    "midday": 12, "midnight": 12, "dozen": 12, "half": 50, "quarter": 25, "once": 1, "twice": 2,
    "single": 1, "double": 2, "pair": 2, "couple": 2, "weekly": 7, "fortnight": 14, "daily": 24,
}  # fmt: skip
_WORD_RE = re.compile(r"[a-z]+")
# A run of this many words shared with the instructions, and with no passage, repeats them:
# the prompt's own wording ("use only the knowledge in the user message...") is no answer,
# and asked for by a caller or by a line planted in a document, it leaks the prompt.
_ECHO_WORDS = 8
_TOKEN_RE = re.compile(r"\w+")
_QUOTED_RE = re.compile(r'"[^"\n]*"|“[^”\n]*”')


def declines(text: str) -> bool:
    """Whether the reply only says, in some words of its own, that it has no answer."""
    text = text.replace("\u2019", "'").strip()
    match = _DECLINES_RE.match(text)
    if match is None or len(text.split()) > _MAX_DECLINING_WORDS:
        return False
    return _GOES_ON_RE.search(text, match.end()) is None


def is_not_speech(text: str) -> bool:
    """Whether the reply is data or code (JSON, a fenced block) rather than sentences."""
    return _NOT_SPEECH_RE.match(text) is not None


def numbers_not_in(text: str, sources: Iterable[str]) -> list[str]:
    """The numbers of ``text`` that no source holds, each as digits. A source holds a number
    it writes in digits (in any script, grouped or not, "2.5" for "2.50"), in words up to the
    tens ("five working days", "noon", "first floor"), or as the hour 12 below it ("17:30"
    for "5:30 pm"); a number of ``text`` said in words is not checked."""
    wanted = _runs(text)
    if not wanted:
        return []
    known: set[str] = {"0"}
    for source in sources:
        known |= _known_runs(source)
    return sorted(wanted - known, key=lambda run: (len(run), run))


def echoes(text: str, instructions: str, sources: Iterable[str]) -> bool:
    """Whether ``text`` repeats a run of the model's ``instructions`` that no source holds.
    The instructions' quoted examples ("According to our returns policy, you can return an
    item within 30 days.") are what an answer should sound like: they do not count."""
    words = _TOKEN_RE.findall(text.lower())
    if len(words) < _ECHO_WORDS:
        return False
    runs = {tuple(words[i : i + _ECHO_WORDS]) for i in range(len(words) - _ECHO_WORDS + 1)}
    shared = runs & _rule_runs(instructions)
    if not shared:
        return False
    for source in sources:
        shared -= _word_runs(source)
    return bool(shared)


@lru_cache(maxsize=64)
def _rule_runs(instructions: str) -> frozenset[tuple[str, ...]]:
    return _word_runs(_QUOTED_RE.sub(" | ", instructions))


@lru_cache(maxsize=4096)
def _word_runs(text: str) -> frozenset[tuple[str, ...]]:
    words = _TOKEN_RE.findall(text.lower())
    return frozenset(tuple(words[i : i + _ECHO_WORDS]) for i in range(len(words) - _ECHO_WORDS + 1))


def _runs(text: str) -> set[str]:
    """Each number of ``text`` as its digits: the whole and, for a decimal, each part
    ("£2.50" is 2 and 50, as "2 pounds 50 pence" says it)."""
    runs: set[str] = set()
    for match in _NUMBER_RE.finditer(text):
        whole, _, decimals = match.group(0).partition(".")
        runs.add(_digits(whole.replace(",", "")))
        if decimals:
            runs.add(_digits(decimals))
    return runs


@lru_cache(maxsize=4096)
def _known_runs(source: str) -> frozenset[str]:
    """What ``source`` counts as holding (numbers_not_in); cached per passage, as the same
    chunks come back call after call."""
    runs = _runs(source)
    for match in _NUMBER_RE.finditer(source):
        whole, _, decimals = match.group(0).partition(".")
        runs.update(_digits(part) for part in whole.split(","))  # a list's commas: "rooms 1,2"
        if len(decimals) == 1:
            runs.add(_digits(decimals + "0"))  # "2.5" is said "2.50"
        value = int(_digits(whole.replace(",", "")))
        if 13 <= value <= 23:
            runs.add(str(value - 12))  # "17:30" is said "5:30 pm"
    runs.update(_digits(re.sub(r"[. ]", "", match.group(0))) for match in _GROUPED_RE.finditer(source))
    runs.update(
        str(_NUMBER_WORDS[word]) for word in _WORD_RE.findall(source.lower()) if word in _NUMBER_WORDS
    )
    return frozenset(runs)


def _digits(run: str) -> str:
    """A run of digits of any script as ASCII digits, without leading zeros."""
    return str(int(run)) if run else "0"
