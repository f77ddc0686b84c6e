"""Text written to steer a model rather than to inform a caller: role headers ("SYSTEM:"),
chat-template tokens, "ignore your previous instructions", notes addressed to the assistant.

A web page's author, or a line planted in a crawled site, can put such text in a document's
title or body. The voice model reads the knowledge summary in its own instructions and the
query_knowledge answer as its tool's output, so neither may carry it: a title that holds it
is left out of the summary, and a sentence that holds it is never read out as an answer.
What counts is written narrowly, so that a business's own wording ("our system is down",
"the user guide", "ignore the previous price list") is not taken for it.
"""

from __future__ import annotations

import re

__all__ = ["looks_like_instructions"]

_INSTRUCTIONS_RE = re.compile(
    # A role header opening a line or sentence in capitals ("SYSTEM:", "ASSISTANT NOTE:"),
    # in brackets or a tag ("[system]", "<assistant>"), or named as a message ("system
    # message:", "developer note:"); "Restart the system: hold the button" is none.
    r"(?:^|(?<=[.!?;:\n(\[{|\"'*#>-]))\s*(?-i:SYSTEM|ASSISTANT|DEVELOPER)(?:\s+[A-Z]+){0,4}\s*[:>\]|]"
    r"|[\[<]\s*/?\s*(?:system|assistant|developer)\s*[\]>]"
    r"|\b(?:system|assistant|developer)\s+(?:message|note|prompt|instructions?|override)\s*:"
    # Chat-template and special tokens.
    r"|<\|?\s*(?:im_start|im_end|system|endoftext|eot_id|start_header_id)\s*\|?>|\[/?INST\]|<</?SYS>>"
    # Asking the reader to drop what it was told.
    r"|\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+|my\s+)?"
    r"(?:previous|prior|above|earlier|preceding|original|system|former)\s+"
    r"(?:instructions?|prompts?|rules|directions|guidelines|messages?)"
    # Addressed to the model.
    r"|\b(?:note|message|instructions?|reminder)\s+(?:to|for)\s+(?:the\s+)?(?:voice\s+)?"
    r"(?:assistant|ai|model|llm|agent|bot|chatbot)\b"
    r"|\byou\s+are\s+(?:now\s+)?(?:an?\s+)?(?:ai|assistant|language\s+model|llm|chatbot)\b"
    r"|\b(?:new|updated|real|secret|hidden)\s+instructions?\s*:",
    re.IGNORECASE,
)


def looks_like_instructions(text: str) -> bool:
    """Whether ``text`` holds a marker of text written to steer a model."""
    return _INSTRUCTIONS_RE.search(text) is not None
