"""Text written to steer a model rather than to inform a caller: role headers ("SYSTEM:"),
chat-template tokens, "ignore your previous instructions", notes addressed to the AI.

A web page's author, or a line planted in a crawled site, can put such text in a document's
title or body. The voice model reads the knowledge summary in its own instructions and the
query_knowledge answer as its tool's output, so neither may carry it: a title that holds it
is left out of the summary, and a passage is read out only up to it.

What counts is written narrowly: a false match silently loses a business's own words
("SYSTEM REQUIREMENTS:", "ASSISTANT MANAGER:", "leave a message for the agent", "ignore the
previous instructions on the box"), so a planted text worded otherwise can pass. It is one
guard among others: the prompts tell both models that knowledge is information, never
instructions.
"""

from __future__ import annotations

import re
import unicodedata

from app.schemas import INVISIBLE

__all__ = ["looks_like_instructions"]

# Invisible characters that would split a marker ("SYS\u200bTEM:").
_INVISIBLE_RE = re.compile(f"[{INVISIBLE}]")
_AI = r"(?:voice\s+assistant|ai\s+assistant|virtual\s+assistant|ai|llm|chatbot|language\s+model)"

_INSTRUCTIONS_RE = re.compile(
    # A role header in capitals opening the text, a line or a sentence: "SYSTEM:", "ASSISTANT
    # PROMPT:"; named in any case as a prompt ("System prompt:", "system override:").
    r"(?:^|(?<=[.!?;:\n(\[{\"'*#-]))\s*(?-i:SYSTEM|ASSISTANT|DEVELOPER)"
    r"(?:\s+(?-i:NOTE|MESSAGE|PROMPT|OVERRIDE|INSTRUCTIONS?))?\s*:"
    r"|\b(?:system|developer)\s+(?:prompt|override|instructions?)\s*:"
    # Chat-template and special tokens, role tags.
    r"|<\|\s*(?:im_start|im_end|system|endoftext|eot_id|start_header_id)\s*\|>"
    r"|<\s*/?\s*(?:system|assistant)\s*>|\[/?(?-i:INST|SYSTEM|ASSISTANT)\]|<</?SYS>>"
    # Asking the reader to drop what it was told.
    r"|\b(?:ignore|disregard|forget)\s+(?:all\s+(?:of\s+)?)?(?:your\s+|all\s+|any\s+)?"
    r"(?:previous|prior|above|earlier|preceding|system)\s+(?:instructions|prompts?)\b"
    r"|\b(?:ignore|disregard|forget)\s+(?:everything|anything|all)\s+you\s+(?:were|have\s+been)\s+told\b"
    # Addressed to the model.
    rf"|\b(?:notes?|messages?|instructions?|reminders?)\s+(?:to|for)\s+(?:the\s+)?{_AI}(?=\s*[:,.!;]|\s*$)"
    rf"|\byou\s+are\s+(?:now\s+)?(?:an?\s+)?{_AI}\b",
    re.IGNORECASE,
)


def looks_like_instructions(text: str) -> bool:
    """Whether ``text`` holds a marker of text written to steer a model."""
    if _INSTRUCTIONS_RE.search(text):
        return True
    # Full-width letters and invisible characters are read past, as a model reads them.
    normal = _INVISIBLE_RE.sub("", unicodedata.normalize("NFKC", text))
    return normal != text and _INSTRUCTIONS_RE.search(normal) is not None
