"""The second model: a chat completion grounded in retrieved chunks, within a deadline."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import httpx
import openai

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

    from app.openai_client import OpenAIClient


class LLMError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class LLMResult:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    # Why the model's answer ended early, when what it had said is kept all the same (a
    # stream broken off after sentences already spoken): the reply is then degraded.
    broken: str | None = None


# Characters no answer may carry: C0 controls but tab and newlines, DEL, and lone UTF-16
# surrogates (valid in a JSON string, not encodable as UTF-8: the reply could not be sent).
# A terminal's colour codes go whole, not just their ESC.
_UNSAFE_RE = re.compile("\x1b\\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# A colour code a stream chunk ends in the middle of: held back until the next chunk ends it.
_OPEN_ESCAPE_RE = re.compile("\x1b(?:\\[[0-9;?]*[ -/]*)?\\Z")
# The model stopped for these before its answer was complete: a price cut to "2" is a wrong one.
_CUT_SHORT = frozenset({"length", "content_filter"})


def clean_model_text(text: str) -> str:
    """The model's text without the characters no answer may carry."""
    return _UNSAFE_RE.sub("", text) if _UNSAFE_RE.search(text) else text


class ChatAnswerer:
    """Calls any OpenAI-compatible chat endpoint.

    The SDK's own retries are off: a caller on the phone cannot wait for backoff, and a
    failed call is answered from the top chunk instead (marked degraded).

    The answer is asked with the client's lean ``post_json`` (app/openai_client.py), not
    ``chat.completions.create``: the typed method walks every message against its
    TypedDicts and builds pydantic models of a reply of which three fields are read.
    A streamed answer (``stream``, early speech) does use the typed method: its SSE
    parsing and error types are what a stream needs, and building a small model per chunk
    costs little beside the model's own pace.
    """

    def __init__(self, client: OpenAIClient) -> None:
        # Copied once here, not per call: with_options() builds a new client each time.
        self.client = client.with_options(max_retries=0)

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        model: str,
        temperature: float,
        max_tokens: int,
        timeout: float,
    ) -> LLMResult:
        if timeout <= 0.05:
            raise LLMError("no time left for the model")
        body = {"model": model, "messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        try:
            # httpx's timeout bounds each read, not the whole call: a server trickling
            # bytes could outlive it, so the total is bounded here as well.
            async with asyncio.timeout(timeout):
                raw = await self.client.post_json("/chat/completions", body, timeout=timeout)
        except (openai.APITimeoutError, TimeoutError) as exc:
            raise LLMError("the model did not answer in time") from exc
        except openai.APIStatusError as exc:
            raise LLMError(f"the model answered HTTP {exc.status_code}") from exc
        except openai.APIError as exc:
            raise LLMError(f"the model call failed: {type(exc).__name__}") from exc
        return _parse(raw, model)

    async def stream(
        self,
        messages: list[dict[str, str]],
        *,
        model: str,
        temperature: float,
        max_tokens: int,
        timeout: float,
    ) -> AsyncIterator[str]:
        """The answer's text as it arrives, in pieces. Closing the iterator early closes
        the HTTP response, which ends the model's work. The caller bounds the total time."""
        if timeout <= 0.05:
            raise LLMError("no time left for the model")
        try:
            stream = await self.client.chat.completions.create(
                model=model,
                messages=cast("list[ChatCompletionMessageParam]", messages),
                temperature=temperature,
                max_tokens=max_tokens,
                stream=True,
                timeout=timeout,
            )
            finish: str | None = None
            held = ""
            async with stream:
                async for chunk in stream:
                    choices = chunk.choices or []
                    text = choices[0].delta.content if choices and choices[0].delta else None
                    if isinstance(text, str) and text:
                        text = held + text
                        open_escape = _OPEN_ESCAPE_RE.search(text)
                        held = open_escape.group() if open_escape else ""
                        if open_escape:
                            text = text[: open_escape.start()]
                        if text := clean_model_text(text):
                            yield text
                    finish = (choices[0].finish_reason if choices else None) or finish
            # A stream that ends without saying why (no finish_reason: a proxy's HTML page,
            # a dropped connection read as the end) is no complete answer.
            if finish is None:
                raise LLMError("the model's stream ended before its answer did")
            if finish in _CUT_SHORT:
                raise LLMError(f"the model's answer was cut short ({finish})")
        except openai.APITimeoutError as exc:
            raise LLMError("the model did not answer in time") from exc
        except openai.APIStatusError as exc:
            raise LLMError(f"the model answered HTTP {exc.status_code}") from exc
        except openai.APIError as exc:
            raise LLMError(f"the model call failed: {type(exc).__name__}") from exc
        except httpx.HTTPError as exc:  # once the reply has begun, the SDK lets httpx's errors through
            raise LLMError(f"the model's stream broke off: {type(exc).__name__}") from exc
        # A chunk that is not JSON, or JSON that is not a chunk.
        except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
            raise LLMError("the model returned a malformed stream") from exc


def _parse(raw: bytes, model: str) -> LLMResult:
    """The answer text and token counts of a chat completion; anything else is malformed."""
    try:
        reply: Any = json.loads(raw)
        choice = reply["choices"][0]
        text = choice["message"]["content"]
    # Not JSON (or nested deeper than the parser goes), or not a completion.
    except (ValueError, TypeError, KeyError, IndexError, RecursionError) as exc:
        raise LLMError("the model returned a malformed response") from exc
    if not isinstance(text, str):
        raise LLMError("the model returned no text")
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    if finish in _CUT_SHORT:
        raise LLMError(f"the model's answer was cut short ({finish})")
    usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
    return LLMResult(
        text=clean_model_text(text),
        model=reply.get("model") if isinstance(reply.get("model"), str) and reply["model"] else model,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
