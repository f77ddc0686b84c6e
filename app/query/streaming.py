"""Early speech: query_knowledge as a stream of events, so a voice starts speaking at the
answer's first sentence instead of after its last (docs/INTEGRATION.md, "Early speech").

A streamed call runs QueryService.query unchanged, with a Speaker: when the answering model
is asked, the Speaker reads its answer as it is written and hands over each sentence once
it is complete, shaped for speech exactly as the whole answer is. Every other answer
(offline, cached, not_found, a fallback) is complete when the query returns, and its
sentences follow at once. Three kinds of events:

- ``holding``: no sentence is ready ``holding_after_s`` into the call while the model writes;
  its ``text`` (reply.holding.md) is for the voice to say meanwhile. Not part of the answer.
- ``sentence``: the next piece of the answer; the pieces put end to end (their ``text``
  keeps the space between sentences) are the final ``answer``.
- ``done``: the whole reply, as the JSON form returns it.

Once a sentence has been spoken it cannot be taken back, so where the JSON form would
change its mind the stream keeps what was said: a model that fails or runs out of time after
its first sentence ends the answer there (marked degraded, not cached), and a NOT_FOUND
written after a sentence is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from app.answering.attribution import strip_citations
from app.answering.extractive import split_sentences
from app.answering.llm import ChatAnswerer, LLMError, LLMResult
from app.answering.speech import make_speakable
from app.errors import AppError
from app.observability.metrics import PROVIDER_ERRORS, observe_query
from app.query.schemas import QueryReply
from app.query.service import NOT_FOUND_MARK, QueryOutcome, QueryService

log = logging.getLogger(__name__)

# The wait before a holding event. A module attribute so that tests drive time by replacing it.
clock_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

# Where a sentence may have ended: shaping the text so far is only worth it there.
_MAY_END = re.compile(r"[.!?…][\"'”’)\]]*\s|\n")

# ``done`` carries the whole reply; the other events a text.
Event = tuple[str, dict[str, Any] | QueryReply]


def pieces(spoken: str) -> list[str]:
    """``spoken`` cut into its sentences; each after the first keeps the space before it, so
    that the pieces put end to end are ``spoken`` exactly."""
    result: list[str] = []
    start = 0
    for sentence in split_sentences(spoken):
        end = spoken.find(sentence, start)
        if end < 0:  # the splitter dropped a list marker: the sentence ends further on
            continue
        end += len(sentence)
        result.append(spoken[start:end])
        start = end
    if start < len(spoken):
        if result:
            result[-1] += spoken[start:]
        else:
            result.append(spoken[start:])
    return result


def pieces_after(text: str, start: int) -> list[str]:
    """The sentences of ``text`` from ``start`` on, end to end exactly ``text[start:]``."""
    result: list[str] = []
    position = 0
    for piece in pieces(text):
        end = position + len(piece)
        if end > start:
            result.append(text[max(position, start) : end])
        position = end
    return result


class Speaker:
    """The answering model's sentences of one streamed call, handed to ``emit`` as soon as
    each is complete (QueryService._generate calls ``speak`` in place of the model's
    ``complete``)."""

    def __init__(self, emit: Callable[[Event], None], *, max_words: int, holding_after_s: float) -> None:
        self.emit = emit
        self.max_words = max_words
        self.holding_after_s = holding_after_s
        self.t0 = time.perf_counter()
        self.said: list[str] = []
        self.finished = False  # the model's stream ended of itself
        self.check: Callable[[str], str | None] | None = None
        self.refused: str | None = None  # why check refused a sentence: none after it is said

    @property
    def spoken(self) -> str:
        return "".join(self.said)

    async def speak(
        self,
        llm: ChatAnswerer,
        holding: str,
        messages: list[dict[str, str]],
        *,
        model: str,
        temperature: float,
        max_tokens: int,
        timeout: float,
        check: Callable[[str], str | None] | None = None,
    ) -> LLMResult:
        """The model's answer, streamed: its text once complete (what was spoken, when the
        stream broke off after a sentence or ``check`` refused one: the answer ends before
        it); raises LLMError when nothing was spoken, so the query falls back as the JSON
        form does."""
        raw = ""
        checked = 0
        broken: str | None = None
        self.check = check
        hold = asyncio.ensure_future(self._hold(holding))
        try:
            # The SDK bounds each read; a server trickling tokens is bounded here as a whole.
            async with asyncio.timeout(timeout):
                stream = llm.stream(
                    messages, model=model, temperature=temperature, max_tokens=max_tokens, timeout=timeout
                )
                async for text in stream:
                    raw += text
                    if _MAY_END.search(raw, max(0, checked - 4)):
                        self._say_complete(raw)
                    checked = len(raw)
                    if self.refused is not None:
                        break  # closing the stream ends the model's work
            if self.refused is not None:
                raise LLMError(self.refused)
            self.finished = True
        except (LLMError, TimeoutError) as exc:
            reason = exc.reason if isinstance(exc, LLMError) else "the model did not answer in time"
            if not self.said:
                raise LLMError(reason) from exc
            if self.refused is None:
                PROVIDER_ERRORS.labels("chat").inc()
            log.warning(
                "answering model failed after %d sentences (%s); ending there", len(self.said), reason
            )
            broken = reason
        finally:
            hold.cancel()
        if self.said and (not self.finished or NOT_FOUND_MARK in raw):
            raw = self.spoken
        return LLMResult(text=raw, model=model, prompt_tokens=0, completion_tokens=0, broken=broken)

    def _say_complete(self, raw: str) -> None:
        """Emit the sentences of ``raw`` that are complete and not yet said. The text so far
        is shaped as a whole, as the finished answer will be; its last sentence may still
        grow and waits."""
        if NOT_FOUND_MARK in raw:
            return
        complete = pieces(make_speakable(strip_citations(raw), max_words=self.max_words))[:-1]
        if complete[: len(self.said)] != self.said:
            return  # the shaping of a spoken sentence changed: the final answer settles it
        for piece in complete[len(self.said) :]:
            if self.check is not None and (reason := self.check(piece)) is not None:
                self.refused = reason
                return
            self.said.append(piece)
            self.emit(("sentence", {"text": piece}))

    async def _hold(self, phrase: str) -> None:
        await clock_sleep(max(0.0, self.holding_after_s - (time.perf_counter() - self.t0)))
        if not self.said:
            self.emit(("holding", {"text": phrase}))


class QueryStream:
    """One streamed query_knowledge call: the query runs as a task, its events pass through
    a queue to the response. ``start`` first, then ``events``; ``finish`` after the response
    logs and caches the call as the JSON form does."""

    def __init__(self, service: QueryService) -> None:
        self.service = service
        self.queue: asyncio.Queue[Event | BaseException | None] = asyncio.Queue()
        self.speaker = Speaker(
            self.queue.put_nowait,
            max_words=service.settings.max_answer_words,
            holding_after_s=service.settings.holding_after_s,
        )
        self.task: asyncio.Task[QueryOutcome | None] | None = None
        self._first: Event | BaseException | None = None

    async def start(self, **query: Any) -> None:
        """Run the query (QueryService.query's arguments) up to its first event. An error
        raised before it (an unknown agent, a bad history) is raised here, while the reply
        can still be a plain 4xx."""
        self.task = asyncio.create_task(self._run(query))
        self._first = await self.queue.get()
        if isinstance(self._first, BaseException):
            raise self._first

    async def events(self) -> AsyncIterator[Event]:
        """The events in order, ``done`` last. Closed early (the caller hung up), it
        cancels the query, and with it the model's call."""
        assert self.task is not None
        item = self._first
        try:
            while item is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
                item = await self.queue.get()
        finally:
            if not self.task.done():
                self.task.cancel()

    async def finish(self) -> None:
        """After the response: the call's log entry and cache entry, as for the JSON form.
        A call cancelled by a hang-up before its answer was complete leaves none."""
        if self.task is None:
            return
        try:
            outcome = await self.task
        except asyncio.CancelledError:
            return
        if outcome is not None:
            observe_query(outcome.response)
            await outcome.finish()

    async def _run(self, query: dict[str, Any]) -> QueryOutcome | None:
        try:
            outcome = await self.service.query(**query, speaker=self.speaker)
        except AppError as exc:
            self.queue.put_nowait(exc)
            return None
        except Exception as exc:  # a fault of ours after the answer: never a silent stream
            self.queue.put_nowait(exc)
            raise
        response = outcome.response
        said = self.speaker.spoken
        if said and not response.answer.startswith(said):
            # Spoken words stand: the answer is what was said, and, when the model finished
            # (the shaping of a spoken sentence changed once the whole answer was known), the
            # rest of its answer. Otherwise the deadline struck mid-answer.
            rest = pieces(response.answer)[len(self.speaker.said) :] if self.speaker.finished else []
            response.answer = said + "".join(rest)
        if said and not self.speaker.finished:
            # Cut short: not cached, and marked as the JSON form marks its fallback.
            response.status, response.degraded = "answered", True
        for piece in pieces_after(response.answer, len(said)):
            self.queue.put_nowait(("sentence", {"text": piece}))
        self.queue.put_nowait(("done", response))
        self.queue.put_nowait(None)
        return outcome
