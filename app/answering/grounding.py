"""Checks of the answering model's text before it is spoken: an answer that declines in
its own words, one that is data or code rather than speech, and one that names a number
none of the passages it was given holds (a price cut or made up is a wrong one)."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["declines", "is_not_speech", "numbers_not_in"]

# The whole reply declines ("Sorry, I don't know.", "I'm sorry, but I can't assist with
# that request.", "Not found."): short, and opening with it. A reply that declines and
# then answers something else is no answer to the question either.
_DECLINES_RE = re.compile(
    r"^\W*(?:not[\s_-]*found\b"
    r"|(?:(?:i'?m|i am)\s+)?(?:(?:so\s+)?sorry|afraid|unfortunately)?[\s,.!]*(?:but\s*,?\s*)?"
    r"i\s*(?:do\s*not|don'?t|cannot|can'?t|can\s+not|am\s+unable\s+to|'?m\s+unable\s+to|am\s+not\s+able\s+to"
    r"|have\s+no)\s+(?:know|have\s+(?:that|this|any|the|enough|such)\b|information|find|help|assist|answer"
    r"|say|tell|provide|see|access))",
    re.IGNORECASE,
)
_MAX_DECLINING_WORDS = 30
# Data, markup or code where speech was asked for: a JSON object or list, a code fence.
_NOT_SPEECH_RE = re.compile(r"^\s*(?:[{\[]\s*[\"{\[\d\]}]|```|~~~)")
# Digits as written, thousands separators inside ("1,650") kept with them.
_NUMBER_RE = re.compile(r"\d+(?:,\d{3})*")


def declines(text: str) -> bool:
    """Whether the reply says, in some words of its own, that it has no answer."""
    return _DECLINES_RE.match(text) is not None and len(text.split()) <= _MAX_DECLINING_WORDS


def is_not_speech(text: str) -> bool:
    """Whether the reply is data or code (JSON, a fenced block) rather than sentences."""
    return _NOT_SPEECH_RE.match(text) is not None


def numbers_not_in(text: str, sources: Iterable[str]) -> list[str]:
    """The numbers of ``text`` that no source holds. Compared as digit runs, leading zeros
    and thousands separators aside, so that "£2.50" meets "2 pounds 50 pence", "9:00" meets
    "9 am" and "1650" meets "1,650"; a number said in words is not checked."""
    known = {run for source in sources for run in _runs(source, parts=True)} | {"0"}
    return sorted({run for run in _runs(text) if run not in known}, key=lambda run: (len(run), run))


def _runs(text: str, *, parts: bool = False) -> set[str]:
    """Each number's digits ("1,650" -> "1650"); with ``parts``, its comma-separated groups
    too, since a source's comma may be a list's ("rooms 1,2 and 3")."""
    runs: set[str] = set()
    for match in _NUMBER_RE.finditer(text):
        whole = match.group(0)
        runs.add(whole.replace(",", "").lstrip("0") or "0")
        if parts:
            runs.update(part.lstrip("0") or "0" for part in whole.split(","))
    return runs
