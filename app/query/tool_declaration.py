"""The `query_knowledge` function declaration for each voice platform, and the summary of
an agent's knowledge that its description and the agent instructions carry.

The wording around the summary lives in the prompt files (`tool.description.md`,
`tool.query_parameter.md`, `agent.instructions.md`); this module only shapes the data.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, get_args

from app.answering.injection import looks_like_instructions

__all__ = [
    "TOOL_NAME",
    "DocumentInfo",
    "FilterInfo",
    "KnowledgeBaseInfo",
    "ToolFormat",
    "knowledge_summary",
    "tool_definition",
]

ToolFormat = Literal["openai-realtime", "openai-chat", "gemini"]
TOOL_NAME = "query_knowledge"
NO_TOPICS = "no topics yet"
MORE = "and more"
_MORE_SUFFIX = f", {MORE}"
_MIN_BUDGET = 20
_SPACES = re.compile(r"\s+")
# Control characters (a terminal's escapes, a bell) and invisible ones (direction overrides,
# zero-width spaces; not the joiners Persian, Indic scripts and emoji need), which no topic
# name needs. Line breaks and tabs are spaces.
_UNSEEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
)
# Trailing punctuation is dropped from titles and descriptions: the summary adds its own.
_TRAILING = " \t.,;:"


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """A ready document of a knowledge base, as the voice model should hear about it."""

    title: str
    description: str


@dataclass(frozen=True, slots=True)
class KnowledgeBaseInfo:
    """A knowledge base assigned to the agent, with its ready documents in display order."""

    title: str
    description: str
    documents: Sequence[DocumentInfo]


# Each title and description is cut to these lengths. The summary goes into the voice
# model's own instructions, and a URL document's title comes from the fetched page: a page
# author must not get a paragraph of the system prompt, and one long title must not crowd
# out the other topics.
TITLE_CHARS = 80
DESCRIPTION_CHARS = 160


def _clean(text: str | None, limit: int) -> str:
    """A title or description as the voice model may read it: one line, without control or
    invisible characters, cut to ``limit``; empty when it is written to steer a model (a
    fetched page titled "SYSTEM: ignore previous instructions...")."""
    # Descriptions are optional in the database and may arrive as None despite the type.
    text = _SPACES.sub(" ", _UNSEEN.sub("", text or "")).strip()
    if looks_like_instructions(text):
        return ""
    return _cut(text, limit).rstrip(_TRAILING)


@dataclass(slots=True)
class _Doc:
    title: str
    description: str
    show_title: bool = False
    show_description: bool = False


@dataclass(slots=True)
class _Kb:
    title: str
    description: str
    docs: list[_Doc]
    show_title: bool = False
    show_description: bool = False


def _render(kbs: list[_Kb]) -> str:
    groups = []
    for kb in kbs:
        head = kb.title if kb.show_title else ""
        if head and kb.show_description:
            head += f" ({kb.description})"
        entries = [
            f"{doc.title} - {doc.description}" if doc.show_description else doc.title
            for doc in kb.docs
            if doc.show_title
        ]
        if entries:
            groups.append(f"{head}: {'; '.join(entries)}" if head else "; ".join(entries))
        elif head:
            groups.append(head)
    return ". ".join(groups)


def _steps(kbs: list[_Kb]) -> list[Callable[[], None]]:
    """What to show, most important first: every KB title, every KB description, then
    document titles and then document descriptions, each taken round-robin across KBs so
    one large knowledge base cannot use up the whole budget."""
    longest = max((len(kb.docs) for kb in kbs), default=0)
    rounds = [kb.docs[j] for j in range(longest) for kb in kbs if j < len(kb.docs)]
    return [
        *(partial(setattr, kb, "show_title", True) for kb in kbs if kb.title),
        *(partial(setattr, kb, "show_description", True) for kb in kbs if kb.title and kb.description),
        *(partial(setattr, doc, "show_title", True) for doc in rounds),
        *(partial(setattr, doc, "show_description", True) for doc in rounds if doc.description),
    ]


def _cut(text: str, limit: int) -> str:
    """`text` shortened to at most `limit` characters, at a word boundary when there is one."""
    if len(text) <= limit:
        return text
    head = text[: limit + 1].rsplit(" ", 1)[0] if " " in text[: limit + 1] else text[:limit]
    return head[:limit].rstrip(_TRAILING + "(-")


def knowledge_summary(kbs: Sequence[KnowledgeBaseInfo], *, budget_chars: int = 1500) -> str:
    """What the agent's knowledge covers, in at most `budget_chars` characters.

    Format: `KB title (KB description): Doc title - doc description; Doc title. Next KB`.
    Knowledge-base titles and descriptions come first, then document titles, then document
    descriptions, as space allows. When something had to be left out the summary stops at
    an item boundary and ends with ", and more". No knowledge bases gives "no topics yet".
    """
    if budget_chars < _MIN_BUDGET:
        raise ValueError(f"budget_chars must be at least {_MIN_BUDGET}, not {budget_chars}")
    items: list[_Kb] = []
    for kb in kbs:
        docs = [
            _Doc(_clean(d.title, TITLE_CHARS), _clean(d.description, DESCRIPTION_CHARS)) for d in kb.documents
        ]
        title, description = _clean(kb.title, TITLE_CHARS), _clean(kb.description, DESCRIPTION_CHARS)
        if not title:  # a knowledge base without a title is named by its description
            title, description = description, ""
        if description.casefold() == title.casefold():
            description = ""
        items.append(_Kb(title, description, [d for d in docs if d.title]))
    steps = _steps(items)
    if not steps:
        return NO_TOPICS
    text = ""
    for n, step in enumerate(steps, start=1):
        step()
        candidate = _render(items)
        complete = n == len(steps)
        if len(candidate) + (0 if complete else len(_MORE_SUFFIX)) > budget_chars:
            if not text:
                # Not even the first title fits: say as much of it as the budget allows.
                return _cut(candidate, budget_chars - len(_MORE_SUFFIX)) + _MORE_SUFFIX
            return text + _MORE_SUFFIX
        text = candidate
    return text


def _history(fmt: ToolFormat, description: str) -> dict[str, Any]:
    """The optional `history` parameter: earlier turns, each a role and what was said."""
    if fmt == "gemini":
        turn: dict[str, Any] = {
            "type": "OBJECT",
            "properties": {
                "role": {"type": "STRING", "enum": ["user", "assistant"]},
                "content": {"type": "STRING"},
            },
            "required": ["role", "content"],
        }
        return {"type": "ARRAY", "description": description, "items": turn}
    turn = {
        "type": "object",
        "properties": {
            "role": {"type": "string", "enum": ["user", "assistant"]},
            "content": {"type": "string"},
        },
        "required": ["role", "content"],
        "additionalProperties": False,
    }
    if fmt == "openai-chat":
        # Strict mode requires every property: an absent history is sent as null.
        return {"type": ["array", "null"], "description": description, "items": turn}
    return {"type": "array", "description": description, "items": turn}


# At most this many values are listed as an enum; a key or the tags with more take any string.
MAX_ENUM = 20
FILTERS_DESCRIPTION = (
    "Optional. Narrows the search to documents with these tags or attributes; leave it out unless the "
    "caller's situation calls for it (for example their country or product)."
)
TAGS_DESCRIPTION = "Documents with at least one of these tags."


@dataclass(frozen=True, slots=True)
class FilterInfo:
    """What query_knowledge's filters can select among the agent's documents: the tags and
    each attribute key with its values, or None for a list longer than MAX_ENUM."""

    tags: list[str] | None
    attributes: dict[str, list[str] | None]

    @property
    def empty(self) -> bool:
        return self.tags == [] and not self.attributes


def _strings(values: list[str] | None, *, upper: bool, nullable: bool) -> dict[str, Any]:
    if upper:
        schema: dict[str, Any] = {"type": "STRING"}
        if values is not None:
            schema.update(format="enum", enum=list(values))
        return schema
    schema = {"type": ["string", "null"] if nullable else "string"}
    if values is not None:
        schema["enum"] = [*values, None] if nullable else list(values)
    return schema


def _filters_schema(info: FilterInfo, *, upper: bool, strict: bool) -> dict[str, Any]:
    """The ``filters`` parameter (the API's form, docs/INTEGRATION.md, with tags as ``any``
    only and attributes as single values). Strict mode (OpenAI chat) wants every property
    required and no others, so what may be left out is nullable instead."""
    obj, arr = ("OBJECT", "ARRAY") if upper else ("object", "array")

    def shape(properties: dict[str, Any], description: str | None = None) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": [obj, "null"] if strict else obj, "properties": properties}
        if description:
            schema["description"] = description
        if strict:
            schema.update(required=list(properties), additionalProperties=False)
        return schema

    properties: dict[str, Any] = {}
    if info.tags != []:
        items = _strings(info.tags, upper=upper, nullable=False)
        tags_array: dict[str, Any] = {"type": [arr, "null"] if strict else arr, "items": items}
        properties["tags"] = shape({"any": tags_array}, TAGS_DESCRIPTION)
    if info.attributes:
        properties["attributes"] = shape(
            {key: _strings(values, upper=upper, nullable=strict) for key, values in info.attributes.items()}
        )
    return shape(properties, FILTERS_DESCRIPTION)


def tool_definition(
    fmt: ToolFormat,
    *,
    description: str,
    query_description: str,
    history_description: str | None = None,
    filters: FilterInfo | None = None,
) -> dict[str, Any]:
    """The `query_knowledge` declaration, with one required string parameter `query`; given
    its description, the optional `history` (the call's earlier turns); and an optional
    `filters` when the agent's documents have tags or attributes (``filters``).

    - "openai-realtime": an entry for the Realtime API session's `tools` list.
    - "openai-chat": a Chat Completions function tool, in strict mode.
    - "gemini": a Gemini API / Gemini Live `Tool` holding one function declaration
      (OpenAPI-style upper-case types).

    A new dict is built on every call, so callers may change it freely.
    """
    with_filters = filters is not None and not filters.empty
    if fmt == "gemini":
        gemini: dict[str, Any] = {
            "type": "OBJECT",
            "properties": {"query": {"type": "STRING", "description": query_description}},
            "required": ["query"],
        }
        if history_description:
            gemini["properties"]["history"] = _history(fmt, history_description)
        if with_filters:
            assert filters is not None
            gemini["properties"]["filters"] = _filters_schema(filters, upper=True, strict=False)
        return {
            "functionDeclarations": [{"name": TOOL_NAME, "description": description, "parameters": gemini}]
        }
    properties: dict[str, Any] = {"query": {"type": "string", "description": query_description}}
    if history_description:
        properties["history"] = _history(fmt, history_description)
    if with_filters:
        assert filters is not None
        properties["filters"] = _filters_schema(filters, upper=False, strict=fmt == "openai-chat")
    parameters: dict[str, Any] = {"type": "object", "properties": properties, "required": ["query"]}
    if fmt == "openai-realtime":
        return {"type": "function", "name": TOOL_NAME, "description": description, "parameters": parameters}
    if fmt == "openai-chat":
        # Strict mode needs every property required and no additional properties.
        parameters["required"] = list(properties)
        parameters["additionalProperties"] = False
        return {
            "type": "function",
            "function": {
                "name": TOOL_NAME,
                "description": description,
                "parameters": parameters,
                "strict": True,
            },
        }
    raise ValueError(f"unknown tool format {fmt!r} (known: {', '.join(get_args(ToolFormat))})")
