"""The second model: a chat completion grounded in retrieved chunks, within a deadline."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import openai
from openai.types.chat import ChatCompletion


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


class ChatAnswerer:
    """Calls any OpenAI-compatible chat endpoint.

    The SDK's own retries are off: one retry is taken here only when the deadline
    leaves room for it, because a caller on the phone cannot wait for backoff.
    """

    def __init__(self, client: openai.AsyncOpenAI) -> None:
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
        try:
            # httpx's timeout bounds each read, not the whole call: a server trickling
            # bytes could outlive it, so the total is bounded here as well.
            async with asyncio.timeout(timeout):
                # A per-request timeout: with_options() here would copy the client per call.
                response = await self.client.chat.completions.create(
                    model=model,
                    messages=messages,  # type: ignore[arg-type]
                    temperature=temperature,
                    max_tokens=max_tokens,
                    timeout=timeout,
                )
        except (openai.APITimeoutError, TimeoutError) as exc:
            raise LLMError("the model did not answer in time") from exc
        except openai.APIStatusError as exc:
            raise LLMError(f"the model answered HTTP {exc.status_code}") from exc
        except openai.APIError as exc:
            raise LLMError(f"the model call failed: {type(exc).__name__}") from exc
        except (ValueError, TypeError) as exc:  # malformed JSON from a broken server
            raise LLMError("the model returned a malformed response") from exc
        if not isinstance(response, ChatCompletion):  # a non-JSON body comes back as text
            raise LLMError("the model returned a malformed response")
        if not response.choices or response.choices[0].message.content is None:
            raise LLMError("the model returned no text")
        usage = response.usage
        return LLMResult(
            text=response.choices[0].message.content,
            model=response.model or model,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )
