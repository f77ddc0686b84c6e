"""query_knowledge's ``filters``: which of the agent's documents a call may retrieve, by their
tags and attributes (docs/INTEGRATION.md, "Filters and freshness").

A filter is given as JSON::

    {"tags": {"any": ["billing", "faq"], "all": ["2026"]},
     "attributes": {"locale": "en-GB", "product_line": {"in": ["basic", "pro"]}}}

Every part must hold (AND): ``any`` (at least one of these tags), ``all`` (each of them),
and each attribute equal to the value, or to one of the ``in`` values. A document without
the attribute fails it. An agent's fixed filters (its settings) are combined with the
call's the same way.

In the database a filter is a list of clauses (``documents_match``, migration 0020): the
agent's and the call's lists are joined, and the context statement hides the documents that
fail any clause, or are outside their validity window, from both searches.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field, ValidationError, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import PydanticCustomError

from app.documents.attributes import MAX_ATTRIBUTES, MAX_TAGS, AttributeKey, AttributeValue, Tag
from app.errors import ValidationFailed
from app.schemas import Input

Clauses = list[dict[str, Any]]

TagList = Annotated[list[Tag], Field(min_length=1, max_length=MAX_TAGS)]
ValueList = Annotated[list[AttributeValue], Field(min_length=1, max_length=MAX_TAGS)]


class TagFilter(Input):
    # null (what a strict-mode function call sends for a part it leaves out) constrains nothing.
    any: TagList | None = Field(None, description="At least one of these tags.")
    all: TagList | None = Field(None, description="Each of these tags.")


class ValueIn(Input):
    in_: ValueList = Field(alias="in", description="One of these values.")


def _one_condition(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """An attribute condition's error names the attribute and what was wrong with the form it
    was sent in, not the members of the union pydantic tried (``ValueIn``,
    ``function-after[...]``)."""
    try:
        return handler(value)
    except ValidationError as exc:
        detail = 'expected a string, or {"in": [strings]}'
        sent_as = [e for e in exc.errors() if (e["loc"][:1] == ("ValueIn",)) == isinstance(value, dict)]
        if isinstance(value, str | dict) and sent_as:
            error = sent_as[0]
            where = ".".join(str(part) for part in error["loc"][1:])
            detail = f"{where}: {error['msg']}" if where else error["msg"]
        # Passed as context, not as the template: the message may hold braces.
        raise PydanticCustomError("attribute_condition", "{detail}", {"detail": detail}) from None


Condition = Annotated[AttributeValue | ValueIn | None, WrapValidator(_one_condition)]


class QueryFilters(Input):
    """The documents a call may retrieve; every part must hold."""

    tags: TagFilter | None = None
    attributes: Annotated[
        dict[AttributeKey, Condition],
        Field(max_length=MAX_ATTRIBUTES, json_schema_extra={"additionalProperties": False}),
    ] = Field(
        default_factory=dict,
        description='Attribute key -> the value it must have, or `{"in": [values]}` (null: any). A key '
        "no document of the agent's knowledge bases has is refused (422).",
    )


def to_clauses(filters: QueryFilters | None) -> Clauses:
    """The filter as documents_match reads it; [] for none."""
    if filters is None:
        return []
    clauses: Clauses = []
    if filters.tags is not None:
        if filters.tags.any is not None:
            clauses.append({"any": filters.tags.any})
        if filters.tags.all is not None:
            clauses.append({"all": filters.tags.all})
    for key, value in filters.attributes.items():
        if value is None:
            continue
        clauses.append({"key": key, "in": value.in_ if isinstance(value, ValueIn) else [value]})
    return clauses


def from_clauses(clauses: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The API form of one filter's clauses (as to_clauses made them); None for none."""
    if not clauses:
        return None
    tags: dict[str, list[str]] = {}
    attributes: dict[str, Any] = {}
    for clause in clauses:
        if "any" in clause or "all" in clause:
            tags.update(clause)
        else:
            values = clause["in"]
            attributes[clause["key"]] = values[0] if len(values) == 1 else {"in": values}
    result: dict[str, Any] = {}
    if tags:
        result["tags"] = tags
    if attributes:
        result["attributes"] = attributes
    return result


def attribute_keys(filters: QueryFilters | None) -> list[str]:
    if filters is None:
        return []
    return sorted(k for k, v in filters.attributes.items() if v is not None)


def require_known_keys(requested: Sequence[str], known: Sequence[str] | None) -> None:
    """422 for an attribute key no document of the agent's KBs has: a misspelt key would
    otherwise hide every document and be heard as "I don't know"."""
    unknown = sorted(set(requested) - set(known or ()))
    if unknown:
        raise ValidationFailed(
            f"unknown filter attribute: {', '.join(unknown)} (no document of this agent's knowledge "
            "bases has it)",
            extra=[{"field": f"filters.attributes.{key}", "message": "unknown attribute"} for key in unknown],
        )


def applied(request: QueryFilters | None, agent_clauses: Any, hidden: Sequence[Any]) -> dict[str, Any] | None:
    """What a call's log row and debug output say of its filters: the call's and the agent's
    (normalised, as applied) and how many documents they and the validity windows hid;
    None when there was nothing to say."""
    if isinstance(agent_clauses, str):
        agent_clauses = json.loads(agent_clauses)
    call, agent = from_clauses(to_clauses(request)), from_clauses(agent_clauses or [])
    if call is None and agent is None and not hidden:
        return None
    return {"request": call, "agent": agent, "hidden_documents": len(hidden)}
