"""Prompt files: see prompts/README.md."""

from app.prompting.library import (
    KnowledgeItem,
    ModelSettings,
    PromptError,
    PromptLibrary,
    PromptSet,
    render_knowledge,
)

__all__ = ["KnowledgeItem", "ModelSettings", "PromptError", "PromptLibrary", "PromptSet", "render_knowledge"]
