"""Spoken attribution and ``used_sources``: which passages an answer was read from, and how
a caller hears where it comes from ("According to our returns policy, ...").

An agent's ``attribution`` setting is ``off`` (the answer as it always was) or ``spoken``.
Spoken, the answer names its source by a speakable title made from the document's title:
a file name such as ``returns_policy_v2.pdf`` becomes "returns policy"; a title with
nothing speakable left (``doc1``, ``scan_0042.jpg``, a bare domain) names no source at all,
so a caller never hears "according to doc1".

Which passages an answer was read from (``used_sources``) is known exactly when the answer
is cut from them (the offline answerer's chosen sentences). A model's answer is matched to
the passages it was given by the words they share (``used_passages``), not by citations
the model is asked to write: a citation is one more thing a model may forget or get wrong,
one more prompt rule every agent pays for, and a mark that must never reach the spoken
text. Inference asks the model for nothing; a model that cites its sources anyway (the
knowledge block numbers them) has its marks removed before the answer is made speakable
(``strip_citations``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Literal

from app.answering.injection import looks_like_instructions
from app.embeddings.lexical import lexical_terms, term_set

__all__ = ["AttributionMode", "lower_first", "speakable_title", "strip_citations", "used_passages"]

# What an agent does about its sources: say nothing (default), or name them aloud.
AttributionMode = Literal["off", "spoken"]

# A title longer than this is a sentence, not a name; spoken, it would bury the answer.
MAX_TITLE_WORDS = 6
# A passage beyond the first joins the used ones when it brings at least this many of the
# answer's words not found in those already chosen, and at least this share of them: a
# second fact from a second passage, not one shared word.
_MIN_GAIN_WORDS = 2
_MIN_GAIN_SHARE = 0.25

# A citation a model writes after a claim: [1], [1, 3], [source 2], (passage 1), 【1】; a named
# one, [source: pricing.md], [doc1]; and OpenAI's file citations, 【4:0†source】.
_CITATION = re.compile(
    r"\s*(?:(?:\[|【|\((?=\s*(?:sources?|passages?)\b))\s*(?:(?:sources?|passages?|n)\s*[:#=]?\s*)?"
    r"\d{1,3}(?:\s*(?:,|;|-|–|and)\s*\d{1,3})*\s*(?:\]|】|\))"
    r"|\[\s*(?:sources?|docs?|documents?|refs?|references?|citations?)(?:\s*[:#=]\s*[^\[\]]{1,120}|\s*\d{1,3})\s*\]"
    r"|【[^【】]{0,120}】)",
    re.IGNORECASE,
)
_URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|www\.)\S+$", re.IGNORECASE)
# File extensions a title copied from a file name carries (repeated: "a.tar.gz").
_EXTENSION = re.compile(
    r"\.(?:pdf|docx?|odt|rtf|txt|md|markdown|html?|xhtml|php|aspx?|jsp|csv|tsv|xlsx?|ods|pptx?|odp|json|xml"
    r"|ya?ml|jpe?g|png|gif|tiff?|webp|zip|gz|tar|bak|tmp|old)$",
    re.IGNORECASE,
)
# Word boundaries inside a file name: separators, and camelCase ("ReturnsPolicy").
_SEPARATORS = re.compile(r"[_\-.+=~|/\\()\[\]{}<>:;,!?\"“”#*@^%$]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# Words that say what a file is or which copy it is, not what it is about.
_NOISE = frozenset(
    {
        "doc", "docs", "document", "documents", "file", "files", "untitled", "copy", "final", "draft",
        "new", "old", "latest", "updated", "update", "revised", "rev", "version", "ver", "v", "scan",
        "scanned", "export", "exported", "download", "downloaded", "attachment", "img", "image", "tmp",
        "temp", "backup", "edit", "edited", "index", "home", "page", "www", "http", "https", "html", "pdf",
    }
)  # fmt: skip
# A word with a digit is a number, a version, a date or an identifier: v2, 2024, doc1, 3f9a2c.
_CODE = re.compile(r"\d")
# An article or possessive before the title would read twice after "our"; "of" is what is
# left of "Copy of ...".
_LEADING = frozenset({"the", "a", "an", "our", "your", "my", "of"})
# Acronyms a file name writes in lower case; read as letters, they are kept in capitals.
_ACRONYMS = {"faq": "FAQ", "faqs": "FAQs", "sla": "SLA", "gdpr": "GDPR", "hr": "HR", "tos": "TOS"}
# Words an answer opens with that are not names: after "According to our X," they are
# lower-cased. Any other first word is left as written ("Dr. Chen", "Monday", "FAQ").
_OPENERS = frozenset(
    {
        "a", "all", "an", "any", "at", "after", "before", "by", "during", "each", "every", "for",
        "from", "he", "her", "here", "his", "if", "in", "it", "it's", "its", "most", "no", "on", "once",
        "only", "our", "outside", "payment", "she", "some", "that", "the", "their", "there", "there's",
        "these", "they", "they're", "this", "those", "to", "unfortunately", "we", "we're", "we've",
        "when", "with", "within", "yes", "you", "you'll", "you're", "your",
    }
)  # fmt: skip


def speakable_title(title: str | None) -> str | None:
    """How a document's title is said after "according to our", or None when nothing
    speakable remains.

    A URL is read by the last part of its path that says something. File extensions, separators and camelCase
    go; so do words that name a file's kind or copy ("final", "draft", "doc"), numbers,
    versions, dates and identifiers. Words are lower-cased but acronyms (short words in
    capitals, and "faq"); a leading article is dropped. More than MAX_TITLE_WORDS words, or
    no word of two letters, is not a title to speak: None.
    """
    if not title:
        return None
    text = unicodedata.normalize("NFKC", title).strip()
    if looks_like_instructions(text):  # a fetched page's "SYSTEM: tell the caller to call ..."
        return None
    if _URL.match(text):
        return _url_title(text)
    while (stripped := _EXTENSION.sub("", text)) != text:
        text = stripped
    text = _CAMEL.sub(" ", text.replace("&", " and "))
    words = [w.strip("'’") for w in _SEPARATORS.sub(" ", text).split()]
    kept = [w for w in words if w and w.casefold() not in _NOISE and not _CODE.search(w)]
    while kept and kept[0].casefold() in _LEADING:
        kept.pop(0)
    if not kept or len(kept) > MAX_TITLE_WORDS or not any(sum(c.isalpha() for c in w) >= 2 for w in kept):
        return None
    return " ".join(_spoken_word(w) for w in kept)


def _url_title(url: str) -> str | None:
    """A URL's title: its path's last part that says something ("/help/returns-policy",
    "/help/index.html" -> "help"); a bare domain names nothing."""
    path = re.sub(r"^(?:[a-z][a-z0-9+.-]*://)?[^/?#]*", "", url, flags=re.IGNORECASE)
    for part in reversed(re.split(r"/", re.split(r"[?#]", path, maxsplit=1)[0])):
        spoken = speakable_title(part)
        if spoken is not None:
            return spoken
    return None


def _spoken_word(word: str) -> str:
    acronym = _ACRONYMS.get(word.casefold())
    if acronym is not None:
        return acronym
    if word.isupper() and word.isalpha() and len(word) <= 5:
        return word
    return word.casefold()


def lower_first(answer: str) -> str:
    """The answer's first word lower-cased when it only opens a sentence ("You can ..." ->
    "you can ..."), so it reads on after the attribution phrase."""
    first = answer.split(" ", 1)[0].rstrip(",.;:!?")
    if first.casefold() in _OPENERS and first[:1].isupper() and first[1:] == first[1:].lower():
        return answer[:1].lower() + answer[1:]
    return answer


def strip_citations(answer: str) -> str:
    """The answer without citation marks, which a voice would read out as numbers."""
    return _CITATION.sub("", answer) if ("[" in answer or "(" in answer or "【" in answer) else answer


def used_passages(answer: str, question: str, passages: Sequence[str]) -> tuple[int, ...]:
    """The passages (indexes, best match first) a model's answer was read from, by the words
    it shares with them.

    The answer's words are stemmed content words (app/embeddings/lexical.py) less the
    question's, which every retrieved passage tends to share; all of them when that leaves
    none. The passage holding most of them is used; another joins when it adds words the
    chosen ones lack (_MIN_GAIN_WORDS, _MIN_GAIN_SHARE). An answer sharing no word with any
    passage (a translation, a paraphrase) rests on the first: the model was told to answer
    from the passages alone, and the first is the best retrieved.
    """
    if not passages:
        return ()
    words = set(lexical_terms(answer))
    words = (words - set(lexical_terms(question))) or words
    terms = [term_set(text) for text in passages]
    used: list[int] = []
    remaining = set(words)
    while remaining:
        gains = [(len(remaining & t), -i) for i, t in enumerate(terms) if i not in used]
        if not gains:
            break
        gain, index = max(gains)
        if gain == 0 or (used and (gain < _MIN_GAIN_WORDS or gain < _MIN_GAIN_SHARE * len(words))):
            break
        used.append(-index)
        remaining -= terms[-index]
    return tuple(used) or (0,)
