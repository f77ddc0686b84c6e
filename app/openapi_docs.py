"""The OpenAPI document says what the service does, so generated clients and Schemathesis can
rely on it: request bodies as pydantic validates them, each route's own error responses in
the service's one error shape, the headers every response carries, and no key asked of the
public probes.

Litestar builds the document from the routes; ``complete_openapi`` then finishes it, once,
before the first request serves it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from litestar import Litestar
from litestar.enums import ParamType
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.spec import (
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    Parameter,
    Reference,
    RequestBody,
    Schema,
)
from litestar.routes import HTTPRoute
from pydantic import BaseModel

from app.agents.schemas import AgentSettingsUpdate
from app.auth import PUBLIC_PATHS, admin_only
from app.errors import AppError
from app.query.schemas import PlaygroundRequest, QueryRequest


class FieldError(BaseModel):
    field: str
    message: str


class ErrorBody(BaseModel):
    error: str
    detail: str
    fields: list[FieldError] | None = None


_DESCRIPTIONS = {
    400: "Malformed request: bad JSON, a bad path, query or header parameter, or a value refused as such",
    401: "Missing, unknown or revoked API key",
    403: "The key's role may not do this, or a quota is reached",
    404: "No such resource in this organisation",
    409: "Conflicts with the current state, or a concurrent change got in the way (retry)",
    413: "The body is larger than the configured limit",
    415: "Unsupported content or file type",
    422: "The body failed validation; `fields` names each problem",
    429: "Rate limit reached, or too many of the organisation's questions in progress; see Retry-After",
    503: "The database is unavailable, or the service too busy to reach it; see Retry-After",
}
_WRITES = {"POST", "PUT", "PATCH", "DELETE"}
_SCHEMAS = "#/components/schemas/"
_HEADERS = "#/components/headers/"
_REQUEST_ID = OpenAPIHeader(
    schema=Schema(type=OpenAPIType.STRING),
    required=True,
    description="The request's id: the client's own X-Request-ID when it sent a sane one; in every log line.",
)
_RETRY_AFTER = OpenAPIHeader(
    schema=Schema(type=OpenAPIType.STRING), required=True, description="Seconds to wait before retrying."
)
# Prompt variants are files in prompts/, known once the app is built: the request fields
# naming one list them.
_VARIANT_FIELDS: dict[type[BaseModel], dict[str, str]] = {
    QueryRequest: {"variant": "null: the agent's own"},
    AgentSettingsUpdate: {"prompt_variant": "null: the default"},
    PlaygroundRequest: {"variant": "null: the agent's own", "compare_variant": "null: no second run"},
}


def complete_openapi(app: Litestar) -> None:
    """Finish the app's OpenAPI document (see the module's docstring)."""
    openapi = app.openapi_schema
    paths = openapi.paths or {}
    components = openapi.components
    schemas = components.schemas
    components.headers = {
        **(components.headers or {}),
        "X-Request-ID": _REQUEST_ID,
        "Retry-After": _RETRY_AFTER,
    }
    _add_model(schemas, ErrorBody)
    variants: list[str] = list(app.state.prompts.variants)
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or (path_item := paths.get(route.path_format)) is None:
            continue
        for handler in route.route_handlers:
            for method in handler.http_methods:
                operation = getattr(path_item, method.lower(), None)
                if isinstance(operation, Operation):
                    _complete_operation(operation, handler, method, route.path_format, schemas, variants)


def _complete_operation(
    operation: Operation,
    handler: HTTPRouteHandler,
    method: str,
    path: str,
    schemas: dict[str, Schema],
    variants: list[str],
) -> None:
    for parameter in operation.parameters or ():
        if isinstance(parameter, Parameter) and isinstance(parameter.schema, Schema):
            parameter.schema = _without_null(parameter.schema)
            if parameter.name == "variant" and parameter.param_in == "query":
                parameter.schema = Schema(type=OpenAPIType.STRING, enum=list(variants))
    forms: Mapping[str, Iterable[type[BaseModel]]] | None = handler.opt.get("request_body")
    if forms is not None:
        operation.request_body = RequestBody(
            required=True,
            content={
                media_type: OpenAPIMediaType(schema=_one_of([_add_model(schemas, m) for m in models]))
                for media_type, models in forms.items()
            },
        )
    data = handler.parsed_fn_signature.parameters.get("data")
    if data is not None and isinstance(operation.request_body, RequestBody):
        _replace_body_schema(operation.request_body, data.annotation, schemas, variants)

    responses = operation.responses = dict(operation.responses or {})
    for response in responses.values():
        if isinstance(response, OpenAPIResponse):
            response.headers = {
                **(response.headers or {}),
                "X-Request-ID": Reference(ref=f"{_HEADERS}X-Request-ID"),
            }
    if path in PUBLIC_PATHS:
        operation.security = []  # the probes need no key
        if path == "/ready" and isinstance(ok := responses.get("200"), OpenAPIResponse):
            responses["503"] = OpenAPIResponse(
                description="Not ready: a check failed; see Retry-After",
                content=ok.content,
                headers={**(ok.headers or {}), "Retry-After": Reference(ref=f"{_HEADERS}Retry-After")},
            )
        return
    for code in error_codes(operation, handler, method):
        headers: dict[str, OpenAPIHeader | Reference] = {
            "X-Request-ID": Reference(ref=f"{_HEADERS}X-Request-ID")
        }
        if code in (429, 503):
            headers["Retry-After"] = Reference(ref=f"{_HEADERS}Retry-After")
        responses[str(code)] = OpenAPIResponse(
            description=_DESCRIPTIONS[code],
            content={"application/json": OpenAPIMediaType(schema=Reference(ref=f"{_SCHEMAS}ErrorBody"))},
            headers=headers,
        )


def error_codes(operation: Operation, handler: HTTPRouteHandler, method: str) -> list[int]:
    """The error statuses an authenticated route can answer.

    Every one: 401 (key), 429 (rate limit), 503 (database). Admin routes: 403. A path
    parameter: 400 (malformed id) and 404. Query or header parameters: 400. A body: 400
    (malformed or missing), 413, 415, 422. A write: 409 (a concurrent change; some refuse a
    change too). Plus what the handler declares in ``opt["errors"]`` (error classes), and
    less the 409 of a POST that changes nothing (``opt["writes"] = False``).
    """
    codes = {401, 429, 503}
    kinds = {ParamType(p.param_in) for p in operation.parameters or () if isinstance(p, Parameter)}
    if any(admin_only in (layer.guards or ()) for layer in handler.ownership_layers):
        codes.add(403)
    if ParamType.PATH in kinds:
        codes |= {400, 404}
    if kinds - {ParamType.PATH}:
        codes.add(400)
    if operation.request_body is not None:
        codes |= {400, 413, 415, 422}
    if method in _WRITES and handler.opt.get("writes", True):
        codes.add(409)
    declared: Iterable[type[AppError]] = handler.opt.get("errors", ())
    codes |= {error.status_code for error in declared}
    return sorted(codes)


def _replace_body_schema(
    body: RequestBody, model: Any, schemas: dict[str, Schema], variants: list[str]
) -> None:
    """Litestar's schema of a request model loses constraints (``ge=0``, a pattern inside an
    optional) and says nothing of ``extra="forbid"``: use pydantic's own."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return
    for media in body.content.values():
        if isinstance(media.schema, Reference) and media.schema.ref.startswith(_SCHEMAS):
            name = media.schema.ref.removeprefix(_SCHEMAS)
            schema = schemas[name] = _model_schema(model, schemas)
            fields = _VARIANT_FIELDS.get(model)
            if fields is not None:
                properties = {**(schema.properties or {})}
                for field, when_null in fields.items():
                    properties[field] = Schema(
                        one_of=[
                            Schema(type=OpenAPIType.STRING, enum=list(variants)),
                            Schema(type=OpenAPIType.NULL),
                        ],
                        description=f"A prompt variant of the service (prompts/); {when_null}.",
                    )
                schema.properties = properties


def _add_model(schemas: dict[str, Schema], model: type[BaseModel]) -> Reference:
    name = model.__name__
    schemas[name] = _model_schema(model, schemas)
    return Reference(ref=f"{_SCHEMAS}{name}")


def _one_of(refs: list[Reference]) -> Schema | Reference:
    return refs[0] if len(refs) == 1 else Schema(one_of=list(refs))


def _model_schema(model: type[BaseModel], schemas: dict[str, Schema]) -> Schema:
    """pydantic's schema of ``model``; the models it nests become components of their own."""
    document = model.model_json_schema(mode="validation", ref_template=_SCHEMAS + "{model}")
    for name, nested in document.pop("$defs", {}).items():
        schemas[name] = _from_json_schema(nested, top=True)
    return _from_json_schema(document, top=True)


_NESTED_ONE = {
    "items",
    "additional_properties",
    "schema_not",
    "schema_if",
    "then",
    "schema_else",
    "contains",
    "property_names",
}
_NESTED_LIST = {"all_of", "any_of", "one_of", "prefix_items"}
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _from_json_schema(node: dict[str, Any], *, top: bool = False) -> Schema:
    """A JSON schema (pydantic's dict) as Litestar's spec objects."""
    aliases = Schema.field_aliases()
    fields: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and not top:
            continue  # pydantic titles every property after its name; Litestar's do not
        name = aliases.get(key) or _CAMEL.sub("_", key).lower()
        fields[name] = _field_value(name, value)
    return Schema(**fields)


def _field_value(name: str, value: Any) -> Any:
    if name == "properties":
        return {k: _nested(v) for k, v in value.items()}
    if name in _NESTED_ONE and isinstance(value, dict):
        return _nested(value)
    if name in _NESTED_LIST:
        return [_nested(v) for v in value]
    if name == "type":
        return [OpenAPIType(v) for v in value] if isinstance(value, list) else OpenAPIType(value)
    return value


def _nested(node: dict[str, Any]) -> Schema | Reference:
    return Reference(ref=node["$ref"]) if "$ref" in node else _from_json_schema(node)


def _without_null(schema: Schema) -> Schema:
    """A query or header parameter is absent or a string, never JSON's null: Litestar's
    schema of an optional one offers null too, which clients then send as "null"."""
    if schema.one_of:
        kept = [s for s in schema.one_of if not (isinstance(s, Schema) and s.type == OpenAPIType.NULL)]
        if len(kept) == 1 and isinstance(kept[0], Schema):
            inner = kept[0]
            for name in ("description", "default", "format", "examples"):
                if getattr(inner, name) is None:
                    setattr(inner, name, getattr(schema, name))
            return inner
    if isinstance(schema.type, list) and OpenAPIType.NULL in schema.type:
        rest = [t for t in schema.type if t != OpenAPIType.NULL]
        schema.type = rest[0] if len(rest) == 1 else rest
        if schema.enum is not None:
            schema.enum = [v for v in schema.enum if v is not None]
    return schema
