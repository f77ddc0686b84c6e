"""The ``query_knowledge`` function declaration in each voice platform's format."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

ToolFormat = Literal["openai-realtime", "openai-chat", "gemini"]
TOOL_NAME = "query_knowledge"
_MORE = " and more"


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    title: str
    description: str


@dataclass(frozen=True, slots=True)
class KnowledgeBaseInfo:
    title: str
    description: str
    documents: Sequence[DocumentInfo]


def _clean(text: str) -> str:
    return " ".join(text.split())


def knowledge_summary(kbs: Sequence[KnowledgeBaseInfo], *, budget_chars: int = 1500) -> str:
    """What the agent's knowledge covers, within ``budget_chars``: KB titles and
    descriptions first (they matter most to the voice model), then document titles and
    descriptions as long as room remains."""
    if not kbs:
        return "no topics yet"
    heads = []
    for kb in kbs:
        head = _clean(kb.title)
        if kb.description.strip():
            head += f" ({_clean(kb.description)})"
        heads.append(head)
    docs: list[list[str]] = []
    for kb in kbs:
        entries = []
        for d in kb.documents:
            entry = _clean(d.title)
            if d.description.strip():
                entry += f" - {_clean(d.description)}"
            entries.append(entry)
        docs.append(entries)

    def render(shown: list[int]) -> str:
        parts = []
        for head, entries, n in zip(heads, docs, shown, strict=True):
            parts.append(f"{head}: {'; '.join(entries[:n])}" if n else head)
        return ". ".join(parts)

    shown = [0] * len(kbs)
    text = render(shown)
    if len(text) > budget_chars:
        cut = text[: budget_chars - len(_MORE)].rsplit(" ", 1)[0].rstrip(" ,;.:(-")
        return cut + _MORE
    # Add documents round-robin across KBs so one large KB cannot take the whole budget.
    truncated = False
    progress = True
    while progress:
        progress = False
        for i, entries in enumerate(docs):
            if shown[i] < len(entries):
                shown[i] += 1
                candidate = render(shown)
                if len(candidate) + len(_MORE) > budget_chars:
                    shown[i] -= 1
                    truncated = True
                    continue
                text, progress = candidate, True
    if truncated or any(n < len(e) for n, e in zip(shown, docs, strict=True)):
        text += _MORE
    return text


def tool_definition(fmt: ToolFormat, *, description: str, query_description: str) -> dict[str, Any]:
    """The declaration, with exactly one required string parameter ``query``."""
    if fmt == "gemini":
        return {
            "functionDeclarations": [
                {
                    "name": TOOL_NAME,
                    "description": description,
                    "parameters": {
                        "type": "OBJECT",
                        "properties": {"query": {"type": "STRING", "description": query_description}},
                        "required": ["query"],
                    },
                }
            ]
        }
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": query_description}},
        "required": ["query"],
    }
    if fmt == "openai-realtime":
        return {"type": "function", "name": TOOL_NAME, "description": description, "parameters": parameters}
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": description,
            "parameters": {**parameters, "additionalProperties": False},
            "strict": True,
        },
    }
