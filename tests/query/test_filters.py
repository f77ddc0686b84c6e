"""query_knowledge's filters and the documents' validity windows (app/query/filters.py,
AGENT_CONTEXT_SQL's hidden documents, migration 0020): what a filter selects, the same in
PostgreSQL and over the in-memory copies; expired and not-yet-effective documents never
retrieved, as time passes, without a write; agents' fixed filters; 422s; other
organisations; the tool declaration's enums; the log row."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from litestar import Litestar
from sqlalchemy import text

from app.main import create_app
from app.query.kb_vectors import KBVectorCache
from tests.conftest import fake_resolver
from tests.helpers import assign_new_agent, create_kb, create_text_doc, served

QUESTION = "How many days do I have for returns?"

DOCS: list[dict[str, Any]] = [
    {
        "title": "Returns GB",
        "content": "Returns are accepted within 30 days of delivery in the United Kingdom.",
        "tags": ["Returns", "UK"],
        "attributes": {"locale": "en-GB", "product_line": "basic"},
    },
    {
        "title": "Returns US",
        "content": "Returns are accepted within 60 days of delivery in the United States.",
        "tags": ["returns", "us"],
        "attributes": {"locale": "en-US", "product_line": "basic"},
    },
    {
        "title": "Returns Pro",
        "content": "Professional plan returns are accepted within 90 days of delivery.",
        "tags": ["returns", "pro", "uk"],
        "attributes": {"locale": "en-GB", "product_line": "pro"},
    },
    {
        "title": "Shipping",
        "content": "Shipping takes three days. Returns travel back with the same courier.",
        "tags": ["shipping"],
        "attributes": {"locale": "en-GB"},
    },
]
ALL = {d["title"] for d in DOCS}


@asynccontextmanager
async def two_paths(
    app: Litestar, database_url: str, settings: Any
) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """The service searching over in-memory copies ("memory", the test's ``app``) and one
    that holds none and searches in PostgreSQL ("sql"), on the same database."""
    sql_app = create_app(
        settings.model_copy(update={"query": settings.query.model_copy(update={"vector_cache_mb": 0})}),
        database_url=database_url,
        resolver=fake_resolver,
        run_workers=False,
    )
    async with served(app) as memory, served(sql_app) as in_sql:
        cache: KBVectorCache = app.state.query_service.kb_vectors
        cache.reload_interval_s = cache.reload_factor = 0
        yield {"memory": memory, "sql": in_sql}


async def make_shop(client: httpx.AsyncClient, org: Any, drain_queue: Any) -> dict[str, Any]:
    kb = await create_kb(client, org.headers, "Shop help")
    docs = [await create_text_doc(client, org.headers, kb["id"], **d) for d in DOCS]
    agent = await assign_new_agent(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": len(DOCS)}
    return {"kb": kb, "agent": agent, "docs": docs}


async def ask(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    agent: str,
    filters: dict[str, Any] | None = None,
    *,
    question: str = QUESTION,
    debug: bool = True,
) -> httpx.Response:
    body: dict[str, Any] = {"query": question}
    if filters is not None:
        body["filters"] = filters
    return await client.post(
        f"/api/agents/{agent}/query_knowledge",
        json=body,
        headers=headers,
        params={"debug": "true"} if debug else {},
    )


async def on_both_paths(
    app: Litestar, paths: dict[str, httpx.AsyncClient], headers: dict[str, str], agent: str, **kw: Any
) -> dict[str, dict[str, Any]]:
    """The same debug call on each path: PostgreSQL's exact plan, and the in-memory copy
    (loaded behind a first call when not held at the KB's current version)."""
    results = {}
    for name, client in paths.items():
        r = await ask(client, headers, agent, **kw)
        assert r.status_code == 200, r.text
        if name == "memory" and r.json()["debug"]["plan"] != "memory":
            await app.state.query_service.kb_vectors.settle()
            r = await ask(client, headers, agent, **kw)
        results[name] = r.json()
        assert results[name]["debug"]["plan"] == {"memory": "memory", "sql": "exact"}[name]
    return results


def ranked(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (c["chunk_id"], c["vector_rank"], c["text_rank"], c["score"]) for c in body["debug"]["candidates"]
    ]


def titles(body: dict[str, Any]) -> set[str]:
    return {c["title"] for c in body["debug"]["candidates"]}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (None, ALL),
        ({}, ALL),
        ({"tags": {"any": ["pro", "US"]}}, {"Returns US", "Returns Pro"}),
        ({"tags": {"all": ["returns", "uk"]}}, {"Returns GB", "Returns Pro"}),
        ({"tags": {"any": ["shipping", "pro"], "all": ["uk"]}}, {"Returns Pro"}),
        ({"attributes": {"locale": "en-GB"}}, {"Returns GB", "Returns Pro", "Shipping"}),
        ({"attributes": {"locale": "en-GB", "product_line": {"in": ["pro"]}}}, {"Returns Pro"}),
        (
            {"attributes": {"product_line": {"in": ["basic", "pro"]}}},
            {"Returns GB", "Returns US", "Returns Pro"},
        ),
        ({"attributes": {"locale": {"in": ["en-US", "en-GB"]}}, "tags": {"any": ["shipping"]}}, {"Shipping"}),
        ({"attributes": {"locale": "fr-FR"}}, set()),
        ({"tags": {"any": ["nothing-has-this"]}}, set()),
        # null (a strict-mode tool call's "left out") constrains nothing.
        ({"tags": {"any": None}, "attributes": {"locale": None}}, ALL),
    ],
)
async def test_filters_select_the_same_chunks_in_memory_and_in_sql(
    app, org, filters, expected, database_url, settings, drain_queue
):
    async with two_paths(app, database_url, settings) as paths:
        shop = await make_shop(paths["memory"], org, drain_queue)
        both = await on_both_paths(app, paths, org.headers, shop["agent"], filters=filters)
        assert titles(both["sql"]) == expected
        assert ranked(both["memory"]) == ranked(both["sql"])
        if not expected:
            assert both["sql"]["status"] == "not_found"
        # BM25 never returns a hidden document's chunk either: every text hit is of a shown one.
        for body in both.values():
            assert all(
                c["title"] in expected for c in body["debug"]["candidates"] if c["text_rank"] is not None
            )


async def _kb_version(engine, kb_id: str) -> int:
    async with engine.connect() as conn:
        return int(
            (
                await conn.execute(
                    text("SELECT content_version FROM knowledge_bases WHERE id = :i"), {"i": kb_id}
                )
            ).scalar_one()
        )


async def test_expired_and_not_yet_effective_documents_are_never_retrieved(
    app, org, drain_queue, database_url, settings
):
    async with two_paths(app, database_url, settings) as paths:
        client = paths["memory"]
        now = datetime.now(UTC)
        kb = await create_kb(client, org.headers, "Shop help")
        content = "Returns are accepted within {} days of delivery."
        windows = {
            "Expired": {"expires_at": (now - timedelta(hours=1)).isoformat()},
            "Ended": {
                "effective_from": (now - timedelta(days=9)).isoformat(),
                "expires_at": (now - timedelta(days=2)).isoformat(),
            },
            "Future": {"effective_from": (now + timedelta(days=1)).isoformat()},
            "Current": {
                "effective_from": (now - timedelta(days=1)).isoformat(),
                "expires_at": (now + timedelta(days=1)).isoformat(),
            },
            "Always": {},
        }
        for n, (title, window) in enumerate(windows.items()):
            await create_text_doc(
                client, org.headers, kb["id"], title=title, content=content.format(n + 10), **window
            )
        agent = await assign_new_agent(client, org.headers, kb["id"])
        assert await drain_queue() == {"ready": 5}
        both = await on_both_paths(app, paths, org.headers, agent)
        for body in both.values():
            assert titles(body) == {"Current", "Always"}
            assert body["debug"]["filters"] == {"request": None, "agent": None, "hidden_documents": 3}
        assert ranked(both["memory"]) == ranked(both["sql"])


async def test_time_passing_hides_and_shows_documents_without_a_write(
    app, org, drain_queue, engine, database_url, settings
):
    """A document's window ends, another's begins: the next call sees it, on both paths,
    with the KB's content version (and so the in-memory copy) unchanged; a cached answer
    from the expired document is not served."""
    async with two_paths(app, database_url, settings) as paths:
        client = paths["memory"]
        kb = await create_kb(client, org.headers, "Shop help")
        old = await create_text_doc(
            client, org.headers, kb["id"], title="Old policy", content="Returns are accepted within 14 days."
        )
        new = await create_text_doc(
            client, org.headers, kb["id"], title="New policy", content="Returns are accepted within 45 days."
        )
        agent = await assign_new_agent(client, org.headers, kb["id"])
        assert await drain_queue() == {"ready": 2}
        switch = datetime.now(UTC) + timedelta(seconds=8)
        for doc, window in (
            (old, {"expires_at": switch.isoformat()}),
            (new, {"effective_from": switch.isoformat()}),
        ):
            r = await client.put(
                f"/api/knowledge/{kb['id']}/documents/{doc['id']}", json=window, headers=org.headers
            )
            assert r.status_code == 200, r.text
        version = await _kb_version(engine, kb["id"])

        before = await on_both_paths(app, paths, org.headers, agent)
        cached_before = await ask(client, org.headers, agent, debug=False)
        assert datetime.now(UTC) < switch, "the set-up took longer than the window allows"
        for body in before.values():
            assert titles(body) == {"Old policy"}
        assert [s["title"] for s in cached_before.json()["sources"]] == ["Old policy"]

        loads = app.state.query_service.kb_vectors.loads
        await asyncio.sleep((switch - datetime.now(UTC)).total_seconds() + 0.2)
        # First, before any call can have cached an answer over the new set of documents.
        again = (await ask(client, org.headers, agent, debug=False)).json()
        assert (again["cached"], [s["title"] for s in again["sources"]]) == (False, ["New policy"])
        after = await on_both_paths(app, paths, org.headers, agent)
        for body in after.values():
            assert titles(body) == {"New policy"}
        # The copy held before the switch answered: nothing was reloaded, nothing written.
        assert app.state.query_service.kb_vectors.loads == loads
        assert await _kb_version(engine, kb["id"]) == version


async def _settings(
    client: httpx.AsyncClient, headers: dict[str, str], agent: str, body: dict[str, Any]
) -> Any:
    return await client.put(
        f"/api/agents/{agent}/settings", json={"prompt_variant": None, **body}, headers=headers
    )


async def test_an_agents_fixed_filters_combine_with_the_calls_and_are_logged(
    app, org, database_url, settings, drain_queue
):
    async with two_paths(app, database_url, settings) as paths:
        shop = await make_shop(paths["memory"], org, drain_queue)
        client, agent = paths["memory"], shop["agent"]
        r = await _settings(client, org.headers, agent, {"filters": {"attributes": {"locale": "en-GB"}}})
        assert r.status_code == 200, r.text
        assert r.json()["filters"] == {"attributes": {"locale": "en-GB"}}
        r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
        assert r.json()["filters"] == {"attributes": {"locale": "en-GB"}}
        # Other settings leave them as they are.
        r = await _settings(client, org.headers, agent, {"escalation": {"on_not_found": "say"}})
        assert r.json()["filters"] == {"attributes": {"locale": "en-GB"}}

        both = await on_both_paths(app, paths, org.headers, agent)
        assert titles(both["sql"]) == {"Returns GB", "Returns Pro", "Shipping"}
        assert ranked(both["memory"]) == ranked(both["sql"])
        # AND: the call cannot widen the agent's filter, only narrow it.
        call = {"tags": {"any": ["RETURNS"]}, "attributes": {"locale": "en-US"}}
        both = await on_both_paths(app, paths, org.headers, agent, filters=call)
        assert titles(both["sql"]) == titles(both["memory"]) == set()
        both = await on_both_paths(app, paths, org.headers, agent, filters={"tags": {"any": ["returns"]}})
        assert titles(both["sql"]) == {"Returns GB", "Returns Pro"}
        assert both["sql"]["debug"]["filters"] == {
            "request": {"tags": {"any": ["returns"]}},
            "agent": {"attributes": {"locale": "en-GB"}},
            "hidden_documents": 2,
        }

        r = await ask(client, org.headers, agent, {"tags": {"any": ["returns"]}}, debug=False)
        assert r.status_code == 200
        logged = await client.get(f"/api/agents/{agent}/queries", headers=org.headers, params={"limit": 1})
        assert logged.json()["items"][0]["id"] == r.json()["query_id"]
        assert logged.json()["items"][0]["filters"] == {
            "request": {"tags": {"any": ["returns"]}},
            "agent": {"attributes": {"locale": "en-GB"}},
            "hidden_documents": 2,
        }

        # Malformed fixed filters are refused like a call's, and change nothing.
        r = await _settings(client, org.headers, agent, {"filters": {"tags": {"any": "returns"}}})
        assert (r.status_code, r.json()["fields"][0]["field"]) == (422, "filters.tags.any")
        r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
        assert r.json()["filters"] == {"attributes": {"locale": "en-GB"}}

        r = await _settings(client, org.headers, agent, {"filters": None})
        assert r.json()["filters"] is None
        both = await on_both_paths(app, paths, org.headers, agent)
        assert titles(both["sql"]) == ALL
        assert both["sql"]["debug"]["filters"] is None
        r = await ask(client, org.headers, agent, debug=False)
        logged = await client.get(f"/api/agents/{agent}/queries", headers=org.headers, params={"limit": 1})
        assert (logged.json()["items"][0]["id"], logged.json()["items"][0]["filters"]) == (
            r.json()["query_id"],
            None,
        )


async def test_a_cached_answer_is_not_served_to_a_call_with_other_filters(
    org, app, database_url, settings, drain_queue
):
    async with two_paths(app, database_url, settings) as paths:
        shop = await make_shop(paths["memory"], org, drain_queue)
        client, agent = paths["memory"], shop["agent"]
        first = (
            await ask(client, org.headers, agent, {"attributes": {"locale": "en-US"}}, debug=False)
        ).json()
        assert (first["cached"], [s["title"] for s in first["sources"]][:1]) == (False, ["Returns US"])
        same = (
            await ask(client, org.headers, agent, {"attributes": {"locale": "en-US"}}, debug=False)
        ).json()
        assert same["cached"] is True
        other = (await ask(client, org.headers, agent, {"tags": {"any": ["pro"]}}, debug=False)).json()
        assert (other["cached"], [s["title"] for s in other["sources"]][:1]) == (False, ["Returns Pro"])


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"locale": "en-GB"}, "filters.locale"),
        ({"tags": ["returns"]}, "filters.tags"),
        ({"tags": {"any": "returns"}}, "filters.tags.any"),
        ({"tags": {"any": []}}, "filters.tags.any"),
        ({"tags": {"none": ["returns"]}}, "filters.tags.none"),
        ({"attributes": {"locale": 5}}, "filters.attributes.locale"),
        ({"attributes": {"locale": {"in": []}}}, "filters.attributes.locale"),
        ({"attributes": {"locale": {"is": "en-GB"}}}, "filters.attributes.locale"),
        ({"attributes": {"Locale": "en-GB"}}, "filters.attributes.Locale.[key]"),
        ({"attributes": "locale=en-GB"}, "filters.attributes"),
    ],
)
async def test_malformed_filters_are_422_naming_the_field(
    org, filters, field, app, database_url, settings, drain_queue
):
    async with two_paths(app, database_url, settings) as paths:
        shop = await make_shop(paths["memory"], org, drain_queue)
        r = await ask(paths["memory"], org.headers, shop["agent"], filters)
        assert r.status_code == 422, r.text
        assert any(f["field"].startswith(field) for f in r.json()["fields"]), r.json()


async def test_an_attribute_key_no_document_has_is_422_naming_it(
    org, app, database_url, settings, drain_queue
):
    async with two_paths(app, database_url, settings) as paths:
        shop = await make_shop(paths["memory"], org, drain_queue)
        r = await ask(
            paths["memory"], org.headers, shop["agent"], {"attributes": {"colour": "red", "locale": "en-GB"}}
        )
        assert r.status_code == 422
        assert r.json()["detail"] == (
            "unknown filter attribute: colour (no document of this agent's knowledge bases has it)"
        )
        assert r.json()["fields"] == [{"field": "filters.attributes.colour", "message": "unknown attribute"}]


async def test_fixed_filters_no_document_passes_are_kept_with_a_warning(
    org, app, database_url, settings, drain_queue
):
    # A misspelt key would otherwise be heard as "I don't have that information" on every call.
    async with two_paths(app, database_url, settings) as paths:
        client = paths["memory"]
        shop = await make_shop(client, org, drain_queue)
        agent = shop["agent"]
        r = await _settings(client, org.headers, agent, {"filters": {"attributes": {"locale": "en-GB"}}})
        assert (r.status_code, r.json()["warnings"]) == (200, [])
        nothing_passes = (
            "no document of this agent's knowledge bases passes its filters: until one does, every call "
            "is answered not_found"
        )
        r = await _settings(client, org.headers, agent, {"filters": {"attributes": {"locael": "en-GB"}}})
        assert (r.status_code, r.json()["filters"], r.json()["warnings"]) == (
            200,
            {"attributes": {"locael": "en-GB"}},
            ["no document of this agent's knowledge bases has the attribute 'locael'", nothing_passes],
        )
        r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
        assert r.json()["warnings"] == [
            "no document of this agent's knowledge bases has the attribute 'locael'",
            nothing_passes,
        ]
        r = await _settings(
            client, org.headers, agent, {"filters": {"tags": {"all": ["returns", "shipping"]}}}
        )
        assert r.json()["warnings"] == [nothing_passes]
        r = await _settings(client, org.headers, agent, {"filters": None})
        assert r.json()["warnings"] == []


async def test_another_organisations_documents_are_never_reached(
    app, org, other_org, drain_queue, database_url, settings
):
    async with two_paths(app, database_url, settings) as paths:
        shop = await make_shop(paths["memory"], org, drain_queue)
        client = paths["memory"]
        theirs = await create_kb(client, other_org.headers, "Their help")
        await create_text_doc(
            client,
            other_org.headers,
            theirs["id"],
            title="Their returns",
            content="Returns are accepted within 7 days of delivery.",
            tags=["returns", "fr"],
            attributes={"locale": "fr-FR", "region": "north"},
        )
        await assign_new_agent(client, other_org.headers, theirs["id"])
        assert await drain_queue() == {"ready": 1}
        both = await on_both_paths(
            app,
            paths,
            org.headers,
            shop["agent"],
            filters={"attributes": {"locale": "fr-FR"}, "tags": {"any": ["fr"]}},
        )
        for body in both.values():
            assert (body["status"], body["debug"]["candidates"]) == ("not_found", [])
        # Their keys are not known to this organisation's agent.
        r = await ask(client, org.headers, shop["agent"], {"attributes": {"region": "north"}})
        assert (r.status_code, r.json()["fields"][0]["field"]) == (422, "filters.attributes.region")
        # And the agent's own declaration lists none of their values.
        r = await client.get(f"/api/agents/{shop['agent']}/tool", headers=org.headers)
        assert r.json()["tool"]["parameters"]["properties"]["filters"]["properties"]["attributes"][
            "properties"
        ]["locale"]["enum"] == ["en-GB", "en-US"]


async def test_the_tool_declaration_lists_the_filterable_tags_and_attributes(
    org, drain_queue, app, database_url, settings
):
    async with two_paths(app, database_url, settings) as paths:
        shop = await make_shop(paths["memory"], org, drain_queue)
        client, agent = paths["memory"], shop["agent"]
        # A key with more than 20 values is a plain string; an expired document's values are not listed.
        for n in range(21):
            await create_text_doc(
                client,
                org.headers,
                shop["kb"]["id"],
                title=f"Store {n}",
                content=f"Store {n} opens at nine.",
                attributes={"store": f"s{n:02d}"},
            )
        await create_text_doc(
            client,
            org.headers,
            shop["kb"]["id"],
            title="Gone",
            content="Gone.",
            tags=["archived"],
            attributes={"locale": "de-DE"},
            expires_at="2020-01-01T00:00:00Z",
        )
        tags = ["pro", "returns", "shipping", "uk", "us"]
        r = await client.get(
            f"/api/agents/{agent}/tool", headers=org.headers, params={"format": "openai-realtime"}
        )
        assert r.status_code == 200
        parameters = r.json()["tool"]["parameters"]
        assert parameters["required"] == ["query"]
        filters = parameters["properties"]["filters"]
        assert filters["type"] == "object"
        assert filters["properties"]["tags"]["properties"] == {
            "any": {"type": "array", "items": {"type": "string", "enum": tags}}
        }
        assert filters["properties"]["attributes"]["properties"] == {
            "locale": {"type": "string", "enum": ["en-GB", "en-US"]},
            "product_line": {"type": "string", "enum": ["basic", "pro"]},
            "store": {"type": "string"},
        }

        r = await client.get(
            f"/api/agents/{agent}/tool", headers=org.headers, params={"format": "openai-chat"}
        )
        parameters = r.json()["tool"]["function"]["parameters"]
        assert parameters["required"] == ["query", "history", "filters"]
        filters = parameters["properties"]["filters"]
        assert (filters["type"], filters["required"], filters["additionalProperties"]) == (
            ["object", "null"],
            ["tags", "attributes"],
            False,
        )
        assert filters["properties"]["tags"]["properties"]["any"] == {
            "type": ["array", "null"],
            "items": {"type": "string", "enum": tags},
        }
        attributes = filters["properties"]["attributes"]
        assert (attributes["required"], attributes["additionalProperties"]) == (
            ["locale", "product_line", "store"],
            False,
        )
        assert attributes["properties"]["locale"] == {
            "type": ["string", "null"],
            "enum": ["en-GB", "en-US", None],
        }
        assert attributes["properties"]["store"] == {"type": ["string", "null"]}

        r = await client.get(f"/api/agents/{agent}/tool", headers=org.headers, params={"format": "gemini"})
        parameters = r.json()["tool"]["functionDeclarations"][0]["parameters"]
        assert parameters["required"] == ["query"]
        filters = parameters["properties"]["filters"]
        assert filters["type"] == "OBJECT"
        assert filters["properties"]["tags"]["properties"]["any"] == {
            "type": "ARRAY",
            "items": {"type": "STRING", "format": "enum", "enum": tags},
        }
        assert filters["properties"]["attributes"]["properties"]["locale"] == {
            "type": "STRING",
            "format": "enum",
            "enum": ["en-GB", "en-US"],
        }

        # What the declaration offers, the call accepts.
        r = await ask(
            client, org.headers, agent, {"tags": {"any": ["uk"]}, "attributes": {"product_line": "pro"}}
        )
        assert titles(r.json()) == {"Returns Pro"}


@pytest.mark.parametrize("fmt", ["openai-realtime", "openai-chat", "gemini"])
async def test_no_filters_parameter_without_tags_or_attributes(client, org, faq_agent, fmt):
    r = await client.get(
        f"/api/agents/{faq_agent['agent']}/tool", headers=org.headers, params={"format": fmt}
    )
    tool = r.json()["tool"]
    parameters = (
        tool["functionDeclarations"][0]["parameters"]
        if fmt == "gemini"
        else tool["function"]["parameters"]
        if fmt == "openai-chat"
        else tool["parameters"]
    )
    # The query and the conversation's history (app/query/conversation.py), no filters.
    assert list(parameters["properties"]) == ["query", "history"]
    assert parameters["required"] == (["query", "history"] if fmt == "openai-chat" else ["query"])


async def test_the_hnsw_plan_of_large_agents_leaves_hidden_documents_out_too(
    app, org, database_url, settings, drain_queue
):
    """The plan of agents above QUERY__EXACT_SEARCH_MAX_CHUNKS (set to 0 here) filters its
    vector candidates the same way: with no HNSW index built at this size it scans exactly,
    and ranks as the exact plan does."""
    large = create_app(
        settings.model_copy(
            update={"query": settings.query.model_copy(update={"exact_search_max_chunks": 0})}
        ),
        database_url=database_url,
        resolver=fake_resolver,
        run_workers=False,
    )
    async with two_paths(app, database_url, settings) as paths, served(large) as hnsw:
        shop = await make_shop(paths["memory"], org, drain_queue)
        for filters, expected in (
            ({"attributes": {"locale": "en-GB"}}, {"Returns GB", "Returns Pro", "Shipping"}),
            ({"tags": {"any": ["us"]}}, {"Returns US"}),
        ):
            exact = (await ask(paths["sql"], org.headers, shop["agent"], filters)).json()
            body = (await ask(hnsw, org.headers, shop["agent"], filters)).json()
            assert (exact["debug"]["plan"], body["debug"]["plan"]) == ("exact", "hnsw")
            assert titles(body) == expected
            assert ranked(body) == ranked(exact)


async def test_the_hidden_documents_chunks_are_read_from_an_index_alone(client, org, engine, drain_queue):
    """BM25 leaves out the chunks of hidden documents, found by document id. Migration 0021's
    index holds the chunk ids, so the lookup never reads the chunks' heap pages (their text
    and vectors). At this size the planner would rather read the small table whole: sequential
    and bitmap scans are switched off for the plan, leaving it a choice of indexes."""
    import json

    from app.db.engine import raw_connection
    from app.query import repository as sql

    shop = await make_shop(client, org, drain_queue)
    clauses = json.dumps([{"key": "locale", "in": ["en-US"]}])  # hides three of the four
    async with raw_connection(engine) as conn, conn.transaction():
        await conn.execute("SET LOCAL enable_seqscan = off")
        await conn.execute("SET LOCAL enable_bitmapscan = off")
        explained = await conn.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + sql.AGENT_CONTEXT_SQL,
            org.id, shop["agent"], "key", None, "default", QUESTION, 30, False, clauses, ["locale"], False,
        )  # fmt: skip
    scans: list[tuple[str, str | None, int]] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == "chunks":
            scans.append((node["Node Type"], node.get("Index Name"), node.get("Actual Rows", 0)))
        for child in node.get("Plans", []):
            walk(child)

    walk(explained[0]["Plan"])  # the pooled connections decode JSON
    # One chunk for each of the three hidden documents.
    assert scans == [("Index Only Scan", "ix_chunks_document", 3)]
