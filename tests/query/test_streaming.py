"""query_knowledge/stream (app/query/streaming.py): server-sent events holding, sentence and
done, offline and with a respx-mocked streaming answering model."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from app.auth import budget_for
from app.ingestion.worker import drain
from app.main import create_app
from app.query import streaming
from app.query.streaming import QueryStream, pieces, pieces_after
from tests.conftest import fake_resolver, make_ingestor
from tests.helpers import assign_new_agent, bearer, create_kb, create_key, create_text_doc
from tests.query.conftest import FAQ, OPENAI_BASE, chat_reply, llm_settings, sent_json

CHAT = f"{OPENAI_BASE}/chat/completions"
HOLDING = "One moment, let me check that for you."
NOT_FOUND = "I'm sorry, I don't have that information."
PAYMENT = "What payment do you accept and when is it due?"


async def _never(seconds: float) -> None:
    await asyncio.Event().wait()


@pytest.fixture(autouse=True)
def _no_holding_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Time is driven by each test: by default the holding delay never runs out."""
    monkeypatch.setattr(streaming, "clock_sleep", _never)


def parse_events(body: str) -> list[tuple[str, Any]]:
    events = []
    for block in body.split("\r\n\r\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\r\n"))
        events.append((fields["event"], json.loads(fields["data"])))
    return events


async def stream_call(
    c: AsyncTestClient[Any], headers: dict[str, str], agent: str, query: str, **params: Any
):
    r = await c.post(
        f"/api/agents/{agent}/query_knowledge/stream", json={"query": query}, headers=headers, params=params
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    return parse_events(r.text)


def sentences(events: list[tuple[str, Any]]) -> list[str]:
    return [data["text"] for kind, data in events if kind == "sentence"]


def chunk(content: str | None, finish_reason: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


class ChatStream(httpx.AsyncByteStream):
    """A streamed chat completion of ``tokens``, ended as OpenAI ends one (a last chunk with
    ``finish``, then [DONE]; ``finish=None``: neither); ``before`` is awaited before the
    first token, ``fail_after`` breaks the stream off after that many tokens."""

    def __init__(
        self,
        tokens: list[str],
        *,
        before: Callable[[], Awaitable[Any]] | None = None,
        fail_after: int | None = None,
        finish: str | None = "stop",
    ) -> None:
        self.tokens = tokens
        self.before = before
        self.fail_after = fail_after
        self.finish = finish
        self.sent = 0
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.before is not None:
            await self.before()
        for token in self.tokens:
            if self.fail_after is not None and self.sent == self.fail_after:
                raise httpx.ReadError("connection reset")
            self.sent += 1
            yield chunk(token)
        if self.finish is not None:
            yield chunk(None, self.finish)
            yield b"data: [DONE]\n\n"

    async def aclose(self) -> None:
        self.closed = True


def stream_reply(body: ChatStream) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)


ANSWER_TOKENS = [
    "We're open ",
    "**9 am to 5 pm**",
    ", Monday to Friday",
    ". On Saturdays",
    " we open",
    " 10 am to 1 pm [1].",
]
SPOKEN = ["We're open 9 AM to 5 PM, Monday to Friday.", " On Saturdays we open 10 AM to 1 PM."]


@pytest.fixture
async def llm(database_url, settings, respx_mock):
    def build(**query: Any):
        return create_app(
            llm_settings(settings, **query),
            database_url=database_url,
            resolver=fake_resolver,
            run_workers=False,
        )

    return build


async def _agent(c, org, app, engine, **agent: Any) -> str:
    kb = await create_kb(c, org.headers, "Dental FAQ")
    await create_text_doc(
        c, org.headers, kb["id"], title="Practice FAQ", content=FAQ, content_type="markdown"
    )
    created = await assign_new_agent(c, org.headers, kb["id"])
    if agent:
        r = await c.put(
            f"/api/agents/{created}/settings", json={"prompt_variant": None, **agent}, headers=org.headers
        )
        assert r.status_code == 200, r.text
    assert await drain(make_ingestor(app, engine)) == {"ready": 1}
    return created


async def logged(engine, agent: str) -> list[Any]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT answer, status, degraded FROM query_log WHERE agent_id = :a"), {"a": agent}
        )
        return list(rows)


# --- sentence pieces ------------------------------------------------------------------------


def test_pieces_put_end_to_end_are_the_text() -> None:
    spoken = "Dr. Lee sees children. The fee is 5 dollars. Call us!"
    assert pieces(spoken) == ["Dr. Lee sees children.", " The fee is 5 dollars.", " Call us!"]
    assert pieces_after(spoken, len("Dr. Lee sees children.")) == [" The fee is 5 dollars.", " Call us!"]
    assert pieces_after(spoken, len(spoken)) == []


# --- offline ------------------------------------------------------------------------------


async def test_offline_answer_is_sentences_then_done(client, org, faq_agent, engine):
    agent = faq_agent["agent"]
    events = await stream_call(client, org.headers, agent, PAYMENT)
    kinds = [kind for kind, _ in events]
    assert kinds == ["sentence", "sentence", "done"]
    done = events[-1][1]
    assert done["status"] == "answered"
    assert done["action"] == "answer"
    assert sentences(events) == [
        "We accept cash, debit cards and credit cards.",
        " Payment is due at the end of each visit.",
    ]
    assert "".join(sentences(events)) == done["answer"]
    assert done["sources"][0]["title"] == "Practice FAQ"
    assert set(done["timings_ms"]) == {"embed", "search", "llm", "total", "own"}
    assert await logged(engine, agent) == [(done["answer"], "answered", False)]
    # Cached like the JSON form: the JSON call that follows is served from the cache.
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": PAYMENT}, headers=org.headers
    )
    assert r.json()["cached"] is True
    assert r.json()["answer"] == done["answer"]


async def test_not_found_is_one_sentence(client, org, faq_agent):
    events = await stream_call(client, org.headers, faq_agent["agent"], "Who painted the Mona Lisa?")
    assert events == [("sentence", {"text": NOT_FOUND}), ("done", events[-1][1])]
    assert events[-1][1]["status"] == "not_found"
    assert events[-1][1]["answer"] == NOT_FOUND


async def test_request_errors_are_plain_json_before_any_stream(client, org, other_org, faq_agent):
    agent = faq_agent["agent"]
    url = f"/api/agents/{agent}/query_knowledge/stream"
    r = await client.post(url, json={"query": "When are you open?"})
    assert r.status_code == 401
    assert r.headers["content-type"] == "application/json"
    r = await client.post(url, json={"query": ""}, headers=org.headers)
    assert r.status_code == 422
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]
    # An unknown agent (here another organisation's) is known only once the query has read
    # the database: still a 404 before any event.
    r = await client.post(url, json={"query": "When are you open?"}, headers=other_org.headers)
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/json"
    key = await create_key(client, org.headers, "query")
    r = await client.post(
        url, json={"query": "When are you open?"}, headers=bearer(key["key"]), params={"debug": "true"}
    )
    assert r.status_code == 403
    assert r.json()["error"]


def test_streamed_calls_count_against_the_query_budget() -> None:
    assert budget_for("/api/agents/a1/query_knowledge/stream") == "query"
    assert budget_for("/api/agents/a1/query_knowledge") == "query"


# --- with the answering model ---------------------------------------------------------------


async def test_model_sentences_stream_and_done_equals_the_json_form(llm, org, engine, respx_mock):
    body = ChatStream(ANSWER_TOKENS)

    def answer(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)
        return stream_reply(body) if sent.get("stream") else chat_reply("".join(ANSWER_TOKENS))

    route = respx_mock.post(CHAT).mock(side_effect=answer)
    app = llm(answer_cache_ttl_s=0)
    async with AsyncTestClient(app=app) as c:
        agent = await _agent(c, org, app, engine)
        events = await stream_call(c, org.headers, agent, "When are you open during the week?")
        r = await c.post(
            f"/api/agents/{agent}/query_knowledge",
            json={"query": "When are you open during the week?"},
            headers=org.headers,
        )
    assert events == [
        ("sentence", {"text": SPOKEN[0]}),
        ("sentence", {"text": SPOKEN[1]}),
        ("done", events[-1][1]),
    ]
    done = events[-1][1]
    assert done["answer"] == "".join(SPOKEN)
    plain = r.json()
    variable = ("query_id", "timings_ms")
    assert {k: v for k, v in done.items() if k not in variable} == {
        k: v for k, v in plain.items() if k not in variable
    }
    assert done["status"] == "answered"
    assert done["degraded"] is False
    assert body.closed is True
    streamed, whole = sent_json(route, 0), sent_json(route, 1)
    assert streamed["stream"] is True
    assert "stream" not in whole
    assert streamed["model"] == "gpt-4o-mini"
    assert streamed["max_tokens"] == 200
    assert streamed["messages"] == whole["messages"]
    system, user = streamed["messages"]
    assert system["role"] == "system"
    assert "NOT_FOUND" in system["content"]
    assert "When are you open during the week?" in user["content"]
    assert "The practice is open Monday to Friday from 9 am to 5 pm." in user["content"]
    assert route.call_count == 2


async def test_holding_when_no_sentence_is_ready_in_time(llm, org, engine, respx_mock, monkeypatch):
    delays: list[float] = []
    time_is_up = asyncio.Event()

    async def clock(seconds: float) -> None:
        # The holding delay runs out at once; the model's first token waits for it.
        delays.append(seconds)
        time_is_up.set()

    monkeypatch.setattr(streaming, "clock_sleep", clock)
    respx_mock.post(CHAT).mock(return_value=stream_reply(ChatStream(ANSWER_TOKENS, before=time_is_up.wait)))
    app = llm(holding_after_s=0.8)
    async with AsyncTestClient(app=app) as c:
        agent = await _agent(c, org, app, engine)
        events = await stream_call(c, org.headers, agent, "When are you open during the week?")
    assert events[:3] == [
        ("holding", {"text": HOLDING}),
        ("sentence", {"text": SPOKEN[0]}),
        ("sentence", {"text": SPOKEN[1]}),
    ]
    assert events[3][0] == "done"
    assert events[3][1]["answer"] == "".join(SPOKEN)  # the holding phrase is no part of the answer
    assert len(delays) == 1
    assert 0 <= delays[0] < 0.8  # counted from the start of the call


async def test_no_holding_once_a_sentence_was_said(llm, org, engine, respx_mock, monkeypatch):
    first_said = asyncio.Event()
    delay_over = asyncio.Event()

    async def clock(seconds: float) -> None:
        await first_said.wait()
        delay_over.set()

    class SlowAfterFirst(ChatStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield chunk("We're open 9 to 5. ")
            yield chunk("Every")  # read on only once the first sentence was handed over
            first_said.set()
            # The delay runs out after the first sentence and before the answer ends.
            await delay_over.wait()
            yield chunk(" weekday.")
            yield chunk(None, "stop")
            yield b"data: [DONE]\n\n"

    monkeypatch.setattr(streaming, "clock_sleep", clock)
    respx_mock.post(CHAT).mock(return_value=stream_reply(SlowAfterFirst([])))
    app = llm()
    async with AsyncTestClient(app=app) as c:
        agent = await _agent(c, org, app, engine)
        events = await stream_call(c, org.headers, agent, "When are you open during the week?")
    assert [kind for kind, _ in events] == ["sentence", "sentence", "done"]
    assert sentences(events) == ["We're open 9 to 5.", " Every weekday."]


async def test_model_saying_not_found_streams_nothing_of_it(llm, org, engine, respx_mock):
    respx_mock.post(CHAT).mock(return_value=stream_reply(ChatStream(["NOT", "_FOUND"])))
    app = llm()
    async with AsyncTestClient(app=app) as c:
        agent = await _agent(c, org, app, engine)
        events = await stream_call(c, org.headers, agent, "Do you accept cheques as payment?")
    assert events == [("sentence", {"text": NOT_FOUND}), ("done", events[-1][1])]
    assert events[-1][1]["status"] == "not_found"


@pytest.mark.parametrize(
    "failure",
    [
        lambda: stream_reply(ChatStream(["We're open", " 9 to 5"], fail_after=1)),
        lambda: httpx.Response(500, json={"error": {"message": "boom"}}),
        lambda: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=b"data: {not json\n\n"
        ),
        # No finish_reason: these streams hold no answer, and were spoken as not_found (and
        # cached as such) where the JSON form fell back to the passage.
        lambda: httpx.Response(
            200, headers={"content-type": "text/html"}, content=b"<html>Bad gateway</html>"
        ),
        lambda: stream_reply(ChatStream([], finish=None)),
        lambda: stream_reply(ChatStream(["We're open", " 9 to 5"], finish=None)),
        lambda: stream_reply(ChatStream(["We're open", " 9 to"], finish="length")),
    ],
    ids=["broken-off", "500", "malformed", "html-page", "empty", "no-finish", "cut-short"],
)
async def test_model_failing_before_a_sentence_falls_back_to_the_passage(
    llm, org, engine, respx_mock, failure
):
    route = respx_mock.post(CHAT).mock(return_value=failure())
    app = llm()
    async with AsyncTestClient(app=app) as c:
        agent = await _agent(c, org, app, engine)
        events = await stream_call(c, org.headers, agent, "When are you open during the week?")
    done = events[-1][1]
    assert [kind for kind, _ in events][-1] == "done"
    assert done["status"] == "answered"
    assert done["degraded"] is True
    assert done["answer"] == "The practice is open Monday to Friday from 9 AM to 5 PM."
    assert "".join(sentences(events)) == done["answer"]
    assert await logged(engine, agent) == [(done["answer"], "answered", True)]
    assert route.call_count == 1  # no retry
    assert sent_json(route)["stream"] is True


@pytest.mark.parametrize(
    "body",
    [
        lambda: ChatStream(["We're open 9 am to 5 pm. ", "On Saturdays", " we open"], fail_after=2),
        # Cut short by max_tokens: the half sentence ("... we open 10 am to") is never said.
        lambda: ChatStream(["We're open 9 am to 5 pm. ", "On Saturdays we open 10 am to"], finish="length"),
    ],
    ids=["broken-off", "cut-short"],
)
async def test_model_failing_after_a_sentence_keeps_what_was_said(llm, org, engine, respx_mock, body):
    respx_mock.post(CHAT).mock(return_value=stream_reply(body()))
    app = llm()
    async with AsyncTestClient(app=app) as c:
        agent = await _agent(c, org, app, engine)
        events = await stream_call(c, org.headers, agent, "When are you open during the week?")
    assert events == [("sentence", {"text": "We're open 9 AM to 5 PM."}), ("done", events[-1][1])]
    done = events[-1][1]
    assert (done["answer"], done["status"], done["degraded"]) == (
        "We're open 9 AM to 5 PM.",
        "answered",
        True,
    )
    # Logged once, and not cached (degraded).
    assert await logged(engine, agent) == [("We're open 9 AM to 5 PM.", "answered", True)]
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM answer_cache"))).scalar() == 0


@pytest.mark.parametrize(
    ("tokens", "answer", "llm_error"),
    [
        # The first sentence was checked and said; the second is refused and never said.
        (
            ["We're open 9 am to 5 pm. ", "On Sundays we open 6 am to 11 pm. ", "Call us."],
            "We're open 9 AM to 5 PM.",
            "the model's answer holds numbers the knowledge does not: 6, 11",
        ),
        # Refused at the first sentence: nothing of the model is said, the passage is.
        (
            ["We're open 7 am to 9 pm every day. ", "Call us."],
            "The practice is open Monday to Friday from 9 AM to 5 PM.",
            "the model's answer holds numbers the knowledge does not: 7",
        ),
    ],
    ids=["second-sentence", "first-sentence"],
)
async def test_a_sentence_with_a_number_the_knowledge_lacks_is_never_said(
    llm, org, engine, respx_mock, tokens, answer, llm_error
):
    respx_mock.post(CHAT).mock(return_value=stream_reply(ChatStream(tokens)))
    app = llm()
    async with AsyncTestClient(app=app) as c:
        agent = await _agent(c, org, app, engine)
        events = await stream_call(c, org.headers, agent, "When are you open during the week?", debug="true")
    done = events[-1][1]
    assert (done["answer"], done["degraded"], done["debug"]["llm_error"]) == (answer, True, llm_error)
    assert "".join(sentences(events)) == done["answer"]


async def test_characters_no_reply_can_carry_do_not_break_the_stream(llm, org, engine, respx_mock):
    # A lone surrogate could not be encoded: the stream broke off after the sentences before it.
    body = ChatStream(["We're open 9 am to 5 pm. ", "On Saturdays \ud800we open 10 am to 1 pm."])
    respx_mock.post(CHAT).mock(return_value=stream_reply(body))
    app = llm()
    async with AsyncTestClient(app=app) as c:
        agent = await _agent(c, org, app, engine)
        events = await stream_call(c, org.headers, agent, "When are you open during the week?")
    done = events[-1][1]
    assert (done["answer"], done["degraded"]) == (
        "We're open 9 AM to 5 PM. On Saturdays we open 10 AM to 1 PM.",
        False,
    )
    assert "".join(sentences(events)) == done["answer"]


async def test_a_topic_handed_over_speaks_only_the_transfer_line(llm, org, engine, respx_mock):
    route = respx_mock.post(CHAT).mock(return_value=chat_reply("We accept cash and cards."))
    app = llm()
    async with AsyncTestClient(app=app) as c:
        agent = await _agent(c, org, app, engine, escalation={"on_not_found": "say", "topics": ["payment"]})
        events = await stream_call(c, org.headers, agent, "Which payment methods do you accept?")
    done = events[-1][1]
    assert done["action"] == "transfer"
    assert "".join(sentences(events)) == done["answer"]
    assert [kind for kind, _ in events] == ["sentence", "sentence", "done"]
    assert "stream" not in sent_json(route)


async def test_hanging_up_cancels_the_model_call(llm, org, engine, respx_mock):
    class Stalling(ChatStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield chunk("We're open 9 am to 5 pm. ")
            yield chunk("On Saturdays")
            await asyncio.Event().wait()  # the model stalls mid-answer
            yield chunk(" we open 10 to 1.")

    stalling = Stalling([])
    respx_mock.post(CHAT).mock(return_value=stream_reply(stalling))
    app = llm()

    async def hang_up_after_the_first_sentence(agent: str) -> tuple[Any, asyncio.Task[Any] | None]:
        # In the app's own event loop, as the endpoint would (the test client's transport
        # reads a response whole, so it cannot hang up half-way).
        stream = QueryStream(app.state.query_service)
        await stream.start(org_id=org.id, agent_id=uuid.UUID(agent), question="When are you open?")
        events = stream.events()
        first = await anext(events)
        await events.aclose()  # the caller hung up
        await stream.finish()
        return first, stream.task

    async with AsyncTestClient(app=app) as c:
        agent = await _agent(c, org, app, engine)
        first, task = await asyncio.to_thread(c.blocking_portal.call, hang_up_after_the_first_sentence, agent)
    assert first == ("sentence", {"text": "We're open 9 AM to 5 PM."})
    assert task is not None
    assert task.cancelled()
    assert stalling.closed is True  # the model's response was closed
    assert await logged(engine, agent) == []
