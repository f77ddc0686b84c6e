from __future__ import annotations

import uuid
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, Field, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

from app.agents.escalation import OnNotFound, phrase_words
from app.answering.attribution import AttributionMode
from app.query.filters import QueryFilters
from app.schemas import Input, NoNul, StrippedRequired

MAX_TOPICS = 20
MAX_TOPIC_LENGTH = 100


def has_words(value: str) -> str:
    """A topic is matched by its words: one without any would never match."""
    if not phrase_words(value):
        raise PydanticCustomError("no_words", "a topic needs a letter or a digit")
    return value


# The pattern says what has_words checks (a word character, as Python's re has it, which
# is what Schemathesis generates and checks with).
Topic = Annotated[
    str,
    StringConstraints(max_length=MAX_TOPIC_LENGTH),
    NoNul,
    StrippedRequired,
    AfterValidator(has_words),
    WithJsonSchema({"type": "string", "maxLength": MAX_TOPIC_LENGTH, "pattern": r"^[^\x00]*\w[^\x00]*$"}),
]


class EscalationSettings(Input):
    on_not_found: OnNotFound = Field(
        "say",
        description="`say`: the not-found line is spoken (`action: say_not_found`); `transfer`: the runtime "
        "is told to hand the caller to a human (`action: transfer`, `transfer_reason: not_found`).",
    )
    topics: list[Topic] = Field(
        default_factory=list,
        max_length=MAX_TOPICS,
        description="Phrases that transfer the caller even when the knowledge answers: a question whose "
        "words contain a topic's words, in order and next to each other (case, accents' forms and "
        "punctuation aside), gets `action: transfer`, `transfer_reason: topic:<phrase>`. Topics saying the "
        "same words are kept once.",
    )


class AgentSettingsUpdate(Input):
    prompt_variant: Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]{1,50}$")] | None
    escalation: EscalationSettings | None = Field(
        None, description="Left out: the agent's escalation policy stays as it is."
    )
    attribution: AttributionMode | None = Field(
        None,
        description="`off`: answers do not name their source. `spoken`: an answer names the document it "
        'comes from by a speakable title ("According to our returns policy, ..."), or nothing when the '
        "title has nothing speakable (docs/INTEGRATION.md). Left out: stays as it is.",
    )
    filters: QueryFilters | None = Field(
        None,
        description="Fixed filters every query_knowledge call of the agent applies, combined (AND) with "
        'the call\'s own, e.g. `{"attributes": {"locale": "en-GB"}}`. Left out: unchanged; null '
        "or `{}`: none.",
    )


class EscalationRead(BaseModel):
    on_not_found: OnNotFound
    topics: list[str] = Field(description="As matched: lower case, words separated by one space.")


class AgentSettingsRead(BaseModel):
    agent_id: uuid.UUID
    prompt_variant: str | None
    available_variants: list[str]
    escalation: EscalationRead
    attribution: AttributionMode
    filters: dict[str, Any] | None = Field(description="The agent's fixed filters; null when none.")
    warnings: list[str] = Field(
        default_factory=list,
        description="What the settings do that is likely a mistake, though allowed: fixed filters that "
        "no document of the agent's knowledge bases passes (a misspelt key, say), so that every call "
        "is answered not_found until a document does.",
    )
