"""Escalation topics: phrases that hand a caller to a human, matched by words.

Deterministic and cheap on purpose: a topic is stored as its words (NFKC, case-folded,
joined by one space), and a question matches when its own words contain the topic's,
in order and next to each other. "Complaint" then matches "I want to make a complaint!"
but not "complaints" or "uncomplainting"; a topic meant to cover both lists both.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Literal

# What an agent does when it has no answer: speak the not-found line, or hand over.
OnNotFound = Literal["say", "transfer"]

_WORD = re.compile(r"\w+")


def phrase_words(text: str) -> str:
    """``text`` as matched: its words, case-folded, separated by one space ("" for none)."""
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def matched_topic(question: str, topics: Sequence[str]) -> str | None:
    """The first of ``topics`` (stored as phrase_words gives them) that ``question`` says."""
    if not topics:
        return None
    # Spaces around both sides make the containment a whole-word match.
    said = f" {phrase_words(question)} "
    for topic in topics:
        if f" {topic} " in said:
            return topic
    return None
