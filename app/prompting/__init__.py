"""Prompt files: see prompts/README.md."""

from app.prompting.library import (
    ConversationTurn,
    KnowledgeItem,
    ModelSettings,
    PromptError,
    PromptLibrary,
    PromptSet,
    render_knowledge,
)

__all__ = [
    "ConversationTurn",
    "KnowledgeItem",
    "ModelSettings",
    "PromptError",
    "PromptLibrary",
    "PromptSet",
    "render_knowledge",
]
