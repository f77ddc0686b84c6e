"""The OpenAPI document (app/openapi_docs.py) says what each route does: the errors it can
answer, its request body as validated (the document upload's three forms included), the
headers of every response, and no key for the public probes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

# Every operation with the error statuses it can answer (app.openapi_docs.error_codes).
ERRORS = {
    "GET /health": "",
    "GET /ready": "503",
    "GET /api/keys": "400 401 403 429 503",
    "POST /api/keys": "400 401 403 409 413 415 422 429 503",
    "DELETE /api/keys/{key_id}": "400 401 403 404 409 429 503",
    "GET /api/knowledge": "400 401 403 429 503",
    "POST /api/knowledge": "400 401 403 409 413 415 422 429 503",
    "GET /api/knowledge/{kb_id}": "400 401 403 404 429 503",
    "PUT /api/knowledge/{kb_id}": "400 401 403 404 409 413 415 422 429 503",
    "DELETE /api/knowledge/{kb_id}": "400 401 403 404 409 429 503",
    "PUT /api/knowledge/{kb_id}/agents": "400 401 403 404 409 413 415 422 429 503",
    "GET /api/knowledge/{kb_id}/documents": "400 401 403 404 429 503",
    "POST /api/knowledge/{kb_id}/documents": "400 401 403 404 409 413 415 422 429 503",
    "POST /api/knowledge/{kb_id}/documents/bulk": "400 401 403 404 409 413 415 422 429 503",
    "POST /api/knowledge/{kb_id}/documents/bulk-delete": "400 401 403 404 409 413 415 422 429 503",
    "GET /api/knowledge/{kb_id}/documents/{doc_id}": "400 401 403 404 429 503",
    "PUT /api/knowledge/{kb_id}/documents/{doc_id}": "400 401 403 404 409 413 415 422 429 503",
    "DELETE /api/knowledge/{kb_id}/documents/{doc_id}": "400 401 403 404 409 429 503",
    "POST /api/knowledge/{kb_id}/documents/{doc_id}/sync": "400 401 403 404 409 429 503",
    "GET /api/knowledge/{kb_id}/documents/{doc_id}/chunks": "400 401 403 404 429 503",
    "POST /api/knowledge/{kb_id}/crawls": "400 401 403 404 409 413 415 422 429 503",
    "GET /api/knowledge/{kb_id}/crawls": "400 401 403 404 429 503",
    "GET /api/knowledge/{kb_id}/crawls/{crawl_id}": "400 401 403 404 429 503",
    "POST /api/knowledge/{kb_id}/crawls/{crawl_id}/cancel": "400 401 403 404 409 429 503",
    "POST /api/knowledge/{kb_id}/crawls/{crawl_id}/run": "400 401 403 404 409 429 503",
    "DELETE /api/knowledge/{kb_id}/crawls/{crawl_id}": "400 401 403 404 409 429 503",
    "GET /api/knowledge-gaps": "400 401 403 404 429 503",
    "GET /api/agents/{agent_id}/knowledge": "400 401 403 404 429 503",
    # A query key may ask (403 only for debug mode); the call is logged after the answer.
    "POST /api/agents/{agent_id}/query_knowledge": "400 401 403 404 413 415 422 429 503",
    "POST /api/agents/{agent_id}/playground": "400 401 403 404 413 415 422 429 503",
    "POST /api/agents/{agent_id}/query_knowledge/stream": "400 401 403 404 413 415 422 429 503",
    "GET /api/agents/{agent_id}/tool": "400 401 403 404 422 429 503",
    "GET /api/agents/{agent_id}/settings": "400 401 403 404 429 503",
    "PUT /api/agents/{agent_id}/settings": "400 401 403 404 409 413 415 422 429 503",
    "GET /api/agents/{agent_id}/queries": "400 401 403 404 429 503",
    "GET /api/webhooks": "400 401 403 429 503",
    "POST /api/webhooks": "400 401 403 409 413 415 422 429 503",
    "GET /api/webhooks/{webhook_id}": "400 401 403 404 429 503",
    "PATCH /api/webhooks/{webhook_id}": "400 401 403 404 409 413 415 422 429 503",
    "DELETE /api/webhooks/{webhook_id}": "400 401 403 404 409 429 503",
    "POST /api/webhooks/{webhook_id}/rotate-secret": "400 401 403 404 409 429 503",
    "GET /api/webhooks/{webhook_id}/deliveries": "400 401 403 404 429 503",
    "POST /api/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver": "400 401 403 404 409 429 503",
    "POST /api/webhooks/{webhook_id}/ping": "400 401 403 404 409 429 503",
}


@pytest.fixture
async def schema(client) -> dict[str, Any]:
    r = await client.get("/schema/openapi.json")
    assert r.status_code == 200
    document: dict[str, Any] = r.json()
    return document


def operations(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f"{method.upper()} {path}": operation
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    }


async def test_each_route_lists_the_errors_it_can_answer(schema):
    listed = {
        name: " ".join(code for code in sorted(op["responses"]) if code >= "400")
        for name, op in operations(schema).items()
    }
    assert listed == ERRORS
    for name, op in operations(schema).items():
        for code, response in op["responses"].items():
            if code >= "400" and name != "GET /ready":
                assert response["content"] == {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
                }, (name, code)


async def test_every_response_names_its_headers(schema):
    for name, op in operations(schema).items():
        for code, response in op["responses"].items():
            expected = {"X-Request-ID": {"$ref": "#/components/headers/X-Request-ID"}}
            if code in ("429", "503"):
                expected["Retry-After"] = {"$ref": "#/components/headers/Retry-After"}
            assert (name, code, response["headers"]) == (name, code, expected)
    assert schema["components"]["headers"]["X-Request-ID"]["required"] is True


async def test_the_probes_need_no_key_and_the_rest_do(schema):
    for name, op in operations(schema).items():
        public = name in ("GET /health", "GET /ready")
        assert (name, op.get("security")) == (name, [] if public else None)
    assert schema["security"] == [{"bearer": []}]


async def test_the_document_upload_documents_its_three_forms(schema):
    body = schema["paths"]["/api/knowledge/{kb_id}/documents"]["post"]["requestBody"]
    assert body == {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"$ref": "#/components/schemas/DocumentCreateText"},
                        {"$ref": "#/components/schemas/DocumentCreateUrl"},
                    ]
                }
            },
            "multipart/form-data": {"schema": {"$ref": "#/components/schemas/DocumentUploadForm"}},
        },
    }
    components = schema["components"]["schemas"]
    attributes = ["attributes", "effective_from", "expires_at", "tags"]
    forms = {
        name: (sorted(components[name]["properties"]), components[name].get("required"))
        for name in ("DocumentCreateText", "DocumentCreateUrl", "DocumentUploadForm")
    }
    assert forms == {
        "DocumentCreateText": (
            sorted(["content", "content_type", "description", "source_path", "title", *attributes]),
            ["title", "content"],
        ),
        "DocumentCreateUrl": (
            sorted(["description", "sync_interval_s", "title", "url", *attributes]),
            ["url"],
        ),
        "DocumentUploadForm": (
            sorted(["description", "file", "source_path", "title", *attributes]),
            ["file"],
        ),
    }
    # Form fields are text: the tags and attributes of an upload are strings (migration 0018).
    upload = components["DocumentUploadForm"]["properties"]
    assert (upload["tags"]["type"], upload["attributes"]["type"]) == ("string", "string")
    file = components["DocumentUploadForm"]["properties"]["file"]
    assert (file["type"], file["format"], file["contentMediaType"]) == (
        "string",
        "binary",
        "application/octet-stream",
    )


async def test_request_bodies_refuse_unknown_fields_and_keep_their_constraints(schema, app):
    components = schema["components"]["schemas"]
    bodies = set()
    for op in operations(schema).values():
        for media in op.get("requestBody", {}).get("content", {}).values():
            refs = media["schema"].get("oneOf", [media["schema"]])
            bodies |= {ref["$ref"].rsplit("/", 1)[1] for ref in refs}
    assert bodies == {
        "AgentAssignmentUpdate",
        "AgentSettingsUpdate",
        "ApiKeyCreate",
        "BulkDelete",
        "BulkUploadForm",
        "CrawlCreate",
        "DocumentCreateText",
        "DocumentCreateUrl",
        "DocumentUpdate",
        "DocumentUploadForm",
        "KnowledgeBaseCreate",
        "KnowledgeBaseUpdate",
        "PlaygroundRequest",
        "QueryRequest",
        "WebhookCreate",
        "WebhookUpdate",
    }
    assert {name: components[name]["additionalProperties"] for name in bodies} == dict.fromkeys(bodies, False)
    kb = components["KnowledgeBaseCreate"]["properties"]
    # Litestar's own schema lost the lower bound 0 (falsy) and every pattern of an optional.
    assert kb["chunk_overlap_tokens"]["anyOf"][0] == {"type": "integer", "minimum": 0, "maximum": 1000}
    assert kb["title"]["pattern"].startswith("^[^\\x00-\\x08\\x0e-\\x1b\\x7f]*")
    variant = components["AgentSettingsUpdate"]["properties"]["prompt_variant"]
    variants = list(app.state.prompts.variants)
    assert variant["oneOf"] == [{"type": "string", "enum": variants}, {"type": "null"}]


async def test_time_bounds_are_date_times_and_no_parameter_is_null(schema):
    for name, op in operations(schema).items():
        for parameter in op.get("parameters", []):
            assert "oneOf" not in parameter["schema"], (name, parameter["name"])
            assert parameter["schema"].get("type") != "null", (name, parameter["name"])
            if parameter["name"] in ("since", "until"):
                assert (parameter["schema"]["type"], parameter["schema"]["format"]) == ("string", "date-time")


async def test_every_schema_component_is_used(schema):
    """A component nothing refers to is noise in generated clients (the query reply's msgspec
    struct once appeared beside the documented QueryResponse)."""
    components = schema["components"]["schemas"]
    text = json.dumps({**schema, "components": {**schema["components"], "schemas": {}}})
    referred = set(re.findall(r'"#/components/schemas/([^"]+)"', text))
    # Components refer to each other too: follow them from those the paths use.
    todo = list(referred)
    while todo:
        found = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(components.get(todo.pop(), {}))))
        todo += sorted(found - referred)
        referred |= found
    assert sorted(set(components) - referred) == []
