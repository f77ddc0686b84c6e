# syntax=docker/dockerfile:1.7
# Production image: locked dependencies, non-root, uvicorn, health check.
# Docker cannot run on the development machines here; this file is kept correct by reading.
FROM python:3.11-slim AS build
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never
RUN pip install --no-cache-dir uv==0.13.8
WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project
COPY app ./app
COPY migrations ./migrations
COPY prompts ./prompts
COPY alembic.ini ./
RUN uv sync --frozen --no-dev
# The offline embedder's int8 model is built from the bundled weights once, here, so a
# container starts in a second instead of four (docs/EMBEDDINGS.md).
RUN .venv/bin/python -c "from pathlib import Path; from app.embeddings.minilm import MiniLMEmbedder; MiniLMEmbedder(cache_dir=Path('/app/.data/models'))"

FROM python:3.11-slim
RUN groupadd --system app && useradd --system --gid app --home /app app
WORKDIR /app
COPY --from=build --chown=app:app /app /app
ENV PATH="/app/.venv/bin:$PATH" \
    PYTHONUNBUFFERED=1 \
    HOST=0.0.0.0 \
    PORT=8000
USER app
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2).status == 200 else 1)"
# DATABASE_URL must point at PostgreSQL with pgvector; `vk serve` migrates, then serves.
CMD ["vk", "serve"]
