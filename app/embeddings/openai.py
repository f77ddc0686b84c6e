"""OpenAI embeddings (and OpenAI-compatible servers) with our own batching and retry policy."""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import openai
import tiktoken
from tenacity import AsyncRetrying, RetryCallState, RetryError, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from app.embeddings.base import MAX_INDEXABLE_DIMENSIONS, EmbeddingError, normalise_rows
from app.openai_client import OpenAIClient

logger = logging.getLogger(__name__)

NATIVE_DIMENSIONS: Mapping[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
# Limits of the OpenAI embeddings endpoint: tokens per input, inputs per request, tokens per request.
MAX_INPUT_TOKENS = 8191
MAX_BATCH_INPUTS = 2048
MAX_BATCH_TOKENS = 300_000
# Longest we ever wait between attempts, whatever the server's retry-after asks for: ingestion
# should rather fail visibly and be retried as a job than sit silent for minutes.
MAX_RETRY_WAIT = 30.0

_RETRYABLE_STATUS = frozenset({408, 429})


class OpenAIEmbedder:
    """Embeds with the OpenAI embeddings API.

    ``embed_documents`` truncates each input to 8191 tokens, batches within ``max_batch_inputs``
    inputs and ``max_batch_tokens`` tokens per request, runs up to ``max_concurrency`` requests at
    once and retries rate limits, server errors, timeouts and connection errors with exponential
    backoff and jitter, honouring ``retry-after-ms`` / ``retry-after``. ``embed_query`` makes a
    single attempt bounded by its timeout. The SDK's own retries are disabled so that this policy
    is the only one.

    ``requests_made`` and ``tokens_sent`` count every attempt sent to the provider (retries
    included), for benchmarks and cost estimates. ``sleep`` replaces ``asyncio.sleep`` between
    retries (tests).
    """

    def __init__(
        self,
        client: OpenAIClient,
        *,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        max_concurrency: int = 4,
        request_timeout: float = 30.0,
        max_attempts: int = 5,
        max_batch_inputs: int = MAX_BATCH_INPUTS,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        self._dimensions = _resolve_dimensions(model, dimensions)
        if max_concurrency < 1 or max_attempts < 1 or max_batch_inputs < 1 or max_batch_tokens < 1:
            raise ValueError("max_concurrency, max_attempts and the batch limits must be at least 1")
        if request_timeout <= 0:
            raise ValueError("request_timeout must be positive")
        self._model = model
        # Only text-embedding-3 and later accept `dimensions`; ada-002 rejects the parameter.
        self._send_dimensions = model.startswith("text-embedding-3")
        self._client = client.with_options(max_retries=0, timeout=request_timeout)
        self._max_concurrency = max_concurrency
        self._max_attempts = max_attempts
        self._max_batch_inputs = max_batch_inputs
        self._max_batch_tokens = max_batch_tokens
        self._sleep = sleep or asyncio.sleep
        # Loaded now rather than on the first query, which is latency-sensitive.
        self._encoding = tiktoken.get_encoding("cl100k_base")
        self._semaphore: asyncio.Semaphore | None = None
        self._semaphore_loop: asyncio.AbstractEventLoop | None = None
        self.requests_made = 0
        self.tokens_sent = 0

    @property
    def model_key(self) -> str:
        """``openai:{model}:{dimensions}``."""
        return f"openai:{self._model}:{self._dimensions}"

    @property
    def dimensions(self) -> int:
        """Length of every returned vector."""
        return self._dimensions

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts in input order; raises ``ValueError`` for an empty or blank text."""
        for index, text in enumerate(texts):
            if not text or text.isspace():
                raise ValueError(f"text {index} is empty; the embeddings API rejects empty input")
        if not texts:
            return []
        # Tokenising a large batch takes long enough to stall queries served by the same loop.
        prepared = await asyncio.to_thread(lambda: [self._prepare(text) for text in texts])
        batches = self._batches([count for _, count in prepared])
        semaphore = self._get_semaphore()
        vectors: list[list[float]] = [[] for _ in texts]

        async def run(batch: list[int]) -> None:
            async with semaphore:
                inputs = [prepared[i][0] for i in batch]
                result = await self._with_retries(inputs, sum(prepared[i][1] for i in batch))
            for i, vector in zip(batch, result, strict=True):
                vectors[i] = vector

        tasks = [asyncio.create_task(run(batch)) for batch in batches]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # One failed batch fails the call: stop spending requests on the others.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return vectors

    async def embed_query(self, text: str, *, timeout: float) -> list[float]:
        """Embed one query in a single attempt that gives up after ``timeout`` seconds.

        The query does not queue behind ingestion batches: it bypasses the concurrency limit.
        """
        if not text or text.isspace():
            raise ValueError("query is empty; the embeddings API rejects empty input")
        query, count = self._prepare(text)
        try:
            # httpx's timeout bounds each phase (connect, each read...); this bounds the total.
            async with asyncio.timeout(timeout):
                vectors = await self._request([query], count, timeout=timeout)
        except TimeoutError as exc:
            raise EmbeddingError(f"query embedding timed out after {timeout:g}s", retryable=True) from exc
        return vectors[0]

    def _prepare(self, text: str) -> tuple[str, int]:
        """The text to send, truncated to MAX_INPUT_TOKENS, and its token count."""
        tokens = self._encoding.encode_ordinary(text)
        if len(tokens) <= MAX_INPUT_TOKENS:
            return text, len(tokens)
        cut = MAX_INPUT_TOKENS
        while True:
            # Dropping a trailing partial UTF-8 character instead of sending U+FFFD.
            truncated = self._encoding.decode_bytes(tokens[:cut]).decode("utf-8", errors="ignore")
            count = len(self._encoding.encode_ordinary(truncated))
            if count <= MAX_INPUT_TOKENS:
                return truncated, count
            cut -= count - MAX_INPUT_TOKENS  # re-tokenising the cut text may differ slightly

    def _batches(self, counts: Sequence[int]) -> list[list[int]]:
        batches: list[list[int]] = []
        current: list[int] = []
        tokens = 0
        for index, count in enumerate(counts):
            full = len(current) >= self._max_batch_inputs or tokens + count > self._max_batch_tokens
            if current and full:
                batches.append(current)
                current, tokens = [], 0
            current.append(index)
            tokens += count
        if current:
            batches.append(current)
        return batches

    def _get_semaphore(self) -> asyncio.Semaphore:
        # Shared by all concurrent embed_documents calls, so the limit is per provider, not per
        # document; recreated if the embedder is reused under a new event loop (CLI runs).
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._semaphore_loop is not loop:
            self._semaphore = asyncio.Semaphore(self._max_concurrency)
            self._semaphore_loop = loop
        return self._semaphore

    async def _with_retries(self, inputs: list[str], tokens: int) -> list[list[float]]:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._max_attempts),
            wait=_wait,
            retry=retry_if_exception(lambda exc: isinstance(exc, EmbeddingError) and exc.retryable),
            sleep=self._sleep,
            before_sleep=self._log_retry,
        )
        try:
            return await retrying(self._request, inputs, tokens)
        except RetryError as exc:
            last = exc.last_attempt.exception()
            raise EmbeddingError(
                f"embedding request failed after {self._max_attempts} attempts: {last}", retryable=True
            ) from last

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        logger.warning(
            "embedding request failed (%s); attempt %d of %d, retrying in %.2fs",
            exc,
            state.attempt_number + 1,
            self._max_attempts,
            wait,
        )

    async def _request(
        self,
        inputs: list[str],
        tokens: int,
        *,
        timeout: float | None = None,
    ) -> list[list[float]]:
        """One attempt; every failure becomes an ``EmbeddingError`` whose cause is the SDK error."""
        self.requests_made += 1
        self.tokens_sent += tokens
        body: dict[str, object] = {"model": self._model, "input": inputs, "encoding_format": "base64"}
        if self._send_dimensions:
            body["dimensions"] = self._dimensions
        try:
            # The lean request (app/openai_client.py): the SDK's typed method would build
            # pydantic models of a reply whose vectors are all that is read. base64, as the
            # SDK itself asks: 4 bytes a dimension instead of ~20 of decimal text.
            raw = await self._client.post_json("/embeddings", body, timeout=timeout)
        except openai.APIStatusError as exc:
            raise _status_error(exc) from exc
        except openai.APITimeoutError as exc:
            raise EmbeddingError("embedding request timed out", retryable=True) from exc
        except openai.APIConnectionError as exc:
            raise EmbeddingError(f"could not reach the embedding provider: {exc}", retryable=True) from exc
        except openai.APIError as exc:
            message = f"embedding provider sent an invalid response: {exc}"
            raise EmbeddingError(message, retryable=False) from exc
        return self._validate(raw, inputs)

    def _validate(self, raw: bytes, inputs: Sequence[str]) -> list[list[float]]:
        """The reply's vectors in input order, checked for count and size, L2-normalised."""
        expected = len(inputs)
        try:
            items = json.loads(raw)["data"]
            if not all(type(item["index"]) is int for item in items):
                raise TypeError("an index is not an integer")
            data = sorted(items, key=lambda item: item["index"])
            vectors = [_decode(item["embedding"]) for item in data]
        # binascii.Error is a ValueError; OverflowError: a number no float holds;
        # RecursionError: JSON nested deeper than the parser goes.
        except (ValueError, TypeError, KeyError, OverflowError, RecursionError) as exc:
            reason = "invalid base64" if isinstance(exc, binascii.Error) else type(exc).__name__
            message = f"embedding provider sent an invalid response: {reason}"
            raise EmbeddingError(message, retryable=False) from exc
        if len(data) != expected or any(item["index"] != i for i, item in enumerate(data)):
            raise EmbeddingError(
                f"provider returned {len(data)} vectors for {expected} inputs", retryable=False
            )
        for vector in vectors:
            if len(vector) != self._dimensions:
                raise EmbeddingError(
                    f"provider returned vectors of {len(vector)} dimensions, expected {self._dimensions}",
                    retryable=False,
                )
        matrix = np.array(vectors)
        # One vector for different texts: a stub or a broken model, whose vectors would rank
        # every passage alike. Stored, they would answer every question with the same chunk.
        if expected > 1 and len(set(inputs)) > 1 and bool(np.all(matrix == matrix[0])):
            raise EmbeddingError(
                f"provider returned the same vector for {expected} different texts: it is not embedding them",
                retryable=False,
            )
        return normalise_rows(matrix, source="embedding provider")


def _decode(embedding: object) -> npt.NDArray[np.float32]:
    """base64 little-endian float32, or a list of numbers from a server that ignores
    ``encoding_format`` (some OpenAI-compatible servers do)."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding, validate=True), dtype="<f4")
    if isinstance(embedding, list) and all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in embedding
    ):
        # float32 as stored; a number beyond it becomes inf, rejected by normalise_rows.
        with np.errstate(over="ignore"):
            return np.asarray(embedding, dtype=np.float32)
    raise TypeError("an embedding is neither base64 nor a list of numbers")


def _resolve_dimensions(model: str, dimensions: int | None) -> int:
    native = NATIVE_DIMENSIONS.get(model)
    if dimensions is None:
        if native is None:
            raise ValueError(f"unknown native size for embedding model {model!r}; set dimensions explicitly")
        if native > MAX_INDEXABLE_DIMENSIONS:
            raise ValueError(
                f"{model} returns {native} dimensions, more than the vector index supports "
                f"({MAX_INDEXABLE_DIMENSIONS}); set dimensions to {MAX_INDEXABLE_DIMENSIONS} or fewer "
                "(e.g. 1536 or 1024)"
            )
        return native
    if not 1 <= dimensions <= MAX_INDEXABLE_DIMENSIONS:
        raise ValueError(
            f"dimensions must be between 1 and {MAX_INDEXABLE_DIMENSIONS} (vector index limit), "
            f"got {dimensions}"
        )
    if native is not None and dimensions > native:
        raise ValueError(f"{model} returns at most {native} dimensions, got {dimensions}")
    if native is not None and dimensions != native and not model.startswith("text-embedding-3"):
        raise ValueError(f"{model} always returns {native} dimensions; it cannot be shortened")
    return dimensions


def _status_error(exc: openai.APIStatusError) -> EmbeddingError:
    status = exc.status_code
    # OpenAI tells clients explicitly when a retry is pointless or worthwhile; trust that first.
    # Otherwise 408 and 429 are about timing, 5xx the provider's trouble; any other 4xx fails again.
    hint = exc.response.headers.get("x-should-retry")
    default = status in _RETRYABLE_STATUS or status >= 500
    retryable = hint == "true" if hint in ("true", "false") else default
    detail = exc.body.get("message") if isinstance(exc.body, dict) else None
    message = f"embedding provider returned HTTP {status}: {detail or exc.message}"
    if status == 401:
        message += " (check the API key)"
    elif status == 404:
        message += " (check the model name and base URL)"
    return EmbeddingError(message, retryable=retryable)


_backoff = wait_random_exponential(multiplier=1.0, max=MAX_RETRY_WAIT)


def _wait(state: RetryCallState) -> float:
    """The server's retry-after when it sent one, else exponential backoff with full jitter."""
    exc = state.outcome.exception() if state.outcome else None
    cause = exc.__cause__ if exc is not None else None
    if isinstance(cause, openai.APIStatusError):
        delay = retry_after(cause.response.headers)
        if delay is not None:
            return min(delay, MAX_RETRY_WAIT)
    return float(_backoff(state))


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        parsed = email.utils.parsedate_tz(raw)
        if parsed is None:
            return None
        value = email.utils.mktime_tz(parsed) - time.time()
    return max(0.0, value) if math.isfinite(value) else None
