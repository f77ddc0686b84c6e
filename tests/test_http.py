"""Shared HTTP behaviour (app/http.py): what OPTIONS says a path allows."""

from __future__ import annotations

import uuid

from litestar.routes import HTTPRoute

ID = str(uuid.uuid4())

# Every path of the API with the methods it serves. Litestar 2 answered OPTIONS with the
# methods of the path's first handler only, so the five paths with several handlers
# (keys, knowledge, a knowledge base, a document, an agent's settings) lost some.
ALLOWED = {
    "/health": "GET, OPTIONS",
    "/ready": "GET, OPTIONS",
    "/metrics": "GET, OPTIONS",
    "/api/keys": "GET, OPTIONS, POST",
    "/api/keys/{key_id}": "DELETE, OPTIONS",
    "/api/knowledge": "GET, OPTIONS, POST",
    "/api/knowledge/{kb_id}": "DELETE, GET, OPTIONS, PUT",
    "/api/knowledge/{kb_id}/agents": "OPTIONS, PUT",
    "/api/knowledge/{kb_id}/documents": "GET, OPTIONS, POST",
    "/api/knowledge/{kb_id}/documents/{doc_id}": "DELETE, GET, OPTIONS, PUT",
    "/api/knowledge/{kb_id}/documents/{doc_id}/chunks": "GET, OPTIONS",
    "/api/knowledge/{kb_id}/documents/{doc_id}/sync": "OPTIONS, POST",
    "/api/knowledge-gaps": "GET, OPTIONS",
    "/api/agents/{agent_id}/knowledge": "GET, OPTIONS",
    "/api/agents/{agent_id}/query_knowledge": "OPTIONS, POST",
    "/api/agents/{agent_id}/playground": "OPTIONS, POST",
    "/api/agents/{agent_id}/tool": "GET, OPTIONS",
    "/api/agents/{agent_id}/settings": "GET, OPTIONS, PUT",
    "/api/agents/{agent_id}/queries": "GET, OPTIONS",
    "/api/knowledge/{kb_id}/documents/bulk": "OPTIONS, POST",
    "/api/knowledge/{kb_id}/documents/bulk-delete": "OPTIONS, POST",
    "/api/knowledge/{kb_id}/crawls": "GET, OPTIONS, POST",
    "/api/knowledge/{kb_id}/crawls/{crawl_id}": "DELETE, GET, OPTIONS",
    "/api/knowledge/{kb_id}/crawls/{crawl_id}/cancel": "OPTIONS, POST",
    "/api/knowledge/{kb_id}/crawls/{crawl_id}/run": "OPTIONS, POST",
    "/api/agents/{agent_id}/query_knowledge/stream": "OPTIONS, POST",
    "/api/webhooks": "GET, OPTIONS, POST",
    "/api/webhooks/{webhook_id}": "DELETE, GET, OPTIONS, PATCH",
    "/api/webhooks/{webhook_id}/deliveries": "GET, OPTIONS",
    "/api/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver": "OPTIONS, POST",
    "/api/webhooks/{webhook_id}/ping": "OPTIONS, POST",
    "/api/webhooks/{webhook_id}/rotate-secret": "OPTIONS, POST",
}


def concrete(template: str) -> str:
    for name in ("key_id", "kb_id", "doc_id", "agent_id", "crawl_id", "webhook_id", "delivery_id"):
        template = template.replace("{" + name + "}", ID)
    return template


async def test_options_lists_every_method_of_every_path(app, client, org):
    # The API's paths: the console's pages (and / that leads to them) are not API paths.
    served = {
        route.path_format
        for route in app.routes
        if isinstance(route, HTTPRoute)
        and not route.path_format.startswith(("/schema", "/console"))
        and route.path_format != "/"
    }
    assert served == set(ALLOWED)  # a new path must be added to the table
    for template, allowed in ALLOWED.items():
        r = await client.options(concrete(template), headers=org.headers)
        assert (template, r.status_code, r.headers.get("allow")) == (template, 204, allowed)


async def test_a_method_not_allowed_names_the_allowed_ones(client, org):
    r = await client.patch("/api/keys", headers=org.headers)
    assert (r.status_code, sorted(r.headers["allow"].split(", ")), r.json()["error"]) == (
        405,
        ["GET", "OPTIONS", "POST"],
        "method_not_allowed",
    )


async def test_a_non_text_parameter_sent_as_null_is_refused(client, org):
    # msgspec's lax conversion read "null" as None: agent_id=null meant all agents.
    agent = str(uuid.uuid4())
    for path, name in (
        ("/api/knowledge-gaps", "agent_id"),
        (f"/api/agents/{agent}/queries", "status"),
        (f"/api/agents/{agent}/queries", "evaluation"),
    ):
        r = await client.get(path, params={name: "null"}, headers=org.headers)
        assert (path, r.status_code, r.json()) == (
            path,
            400,
            {
                "error": "bad_request",
                "detail": f"invalid parameters: {name}",
                "fields": [
                    {"field": name, "message": "null is not a value; leave the parameter out instead"}
                ],
            },
        )
