"""Choose the embedding provider from the settings."""

from __future__ import annotations

from app.config import Settings
from app.embeddings.base import Embedder
from app.embeddings.lexical import LexicalEmbedder
from app.embeddings.local import LocalEmbedder
from app.embeddings.minilm import shared_minilm
from app.embeddings.openai import OpenAIEmbedder
from app.openai_client import OpenAIClient


def build_embedder(settings: Settings, client: OpenAIClient | None) -> Embedder:
    provider = settings.embedding_provider
    if provider == "openai":
        if client is None:
            raise ValueError("the openai embedding provider needs OPENAI_API_KEY")
        return OpenAIEmbedder(
            client,
            model=settings.embedding.openai_model,
            dimensions=settings.embedding.openai_dimensions,
            max_concurrency=settings.embedding.max_concurrency,
        )
    if provider == "local":
        return LocalEmbedder(settings.embedding.local_model)
    if provider == "minilm":
        return shared_minilm(settings.embedding.minilm_precision, settings.embedding.model_cache_dir)
    return LexicalEmbedder(settings.embedding.lexical_dimensions)
