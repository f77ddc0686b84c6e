"""Embedding providers: lexical (offline default), OpenAI and local sentence-transformers."""

from app.embeddings.base import MAX_INDEXABLE_DIMENSIONS, Embedder, EmbeddingError
from app.embeddings.lexical import LexicalEmbedder, lexical_terms
from app.embeddings.local import LocalEmbedder
from app.embeddings.openai import OpenAIEmbedder

__all__ = [
    "MAX_INDEXABLE_DIMENSIONS",
    "Embedder",
    "EmbeddingError",
    "LexicalEmbedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "lexical_terms",
]
