"""The API reference at ``/schema``: Swagger UI from the files of the swagger-ui-bundle
package, served by the service itself, so the page works on a machine without Internet
access (Litestar's own render plugins load their scripts and icon from a CDN).

The bundled Swagger UI (4.15) reads OpenAPI 3.0 only and refuses the 3.1 document Litestar
writes ("Unable to render this definition"). The page therefore embeds a 3.0 rendition of the
document, made once: the few 3.1 forms the service uses (a ``null`` alternative, a list of
types) become ``nullable``. ``/schema/openapi.json`` stays the exact 3.1 document that clients
and Schemathesis read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from litestar import get
from litestar.datastructures import CacheControlHeader
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.params import FromPath
from litestar.response import File
from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]  # ships no types

from app.errors import NotFound

if TYPE_CHECKING:
    from litestar import Request, Router

ASSETS = "/assets"
SWAGGER_UI = Path(str(swagger_ui_path))
# Only what the page loads (the package also holds a demo page that fetches petstore.swagger.io).
ASSET_MEDIA_TYPES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui-standalone-preset.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}


class LocalSwaggerUI(SwaggerRenderPlugin):
    """Swagger UI whose page references nothing but the service's own ``/schema/assets``."""

    def __init__(self, schema_path: str, *, path: str = "/swagger") -> None:
        assets = f"{schema_path}{ASSETS}"
        super().__init__(
            js_url=f"{assets}/swagger-ui-bundle.js",
            css_url=f"{assets}/swagger-ui.css",
            standalone_preset_js_url=f"{assets}/swagger-ui-standalone-preset.js",
            favicon=f"<link rel='icon' type='image/png' href='{assets}/favicon-32x32.png'>",
            path=path,
        )
        self._displayed: dict[str, Any] | None = None

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        if self._displayed is None:
            self._displayed = as_openapi_30(openapi_schema)
        return super().render(request, self._displayed)

    def receive_router(self, router: Router) -> None:
        router.register(swagger_asset)


@get(f"{ASSETS}/{{name:str}}", include_in_schema=False, cache_control=CacheControlHeader(max_age=86_400))
async def swagger_asset(name: FromPath[str]) -> File:
    media_type = ASSET_MEDIA_TYPES.get(name)
    if media_type is None:
        raise NotFound(f"no asset {name!r}")
    return File(SWAGGER_UI / name, media_type=media_type, content_disposition_type="inline")


def as_openapi_30(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of a 3.1 document that Swagger UI 4 displays: ``oneOf``/``anyOf`` with a
    ``{"type": "null"}`` alternative and ``type: [..., "null"]`` become ``nullable: true``."""
    converted: dict[str, Any] = _nullable(document)
    converted["openapi"] = "3.0.3"
    return converted


def _nullable(node: Any) -> Any:
    """A converted copy of ``node``: containers are rebuilt, never changed in place."""
    if isinstance(node, list):
        return [_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _nullable(value) for key, value in node.items()}
    types = node.get("type")
    if isinstance(types, list) and "null" in types:
        others = [t for t in types if t != "null"]
        node["nullable"] = True
        if len(others) == 1:
            node["type"] = others[0]
        else:
            del node["type"]
            node["anyOf"] = [{"type": t} for t in others]
    for combinator in ("oneOf", "anyOf"):
        options = node.get(combinator)
        if not isinstance(options, list) or {"type": "null"} not in options:
            continue
        others = [o for o in options if o != {"type": "null"}]
        del node[combinator]
        node["nullable"] = True
        if len(others) == 1:
            # 3.0 ignores the siblings of a $ref: wrap it so nullable still applies.
            node.update({"allOf": others} if "$ref" in others[0] else others[0])
        else:
            node[combinator] = others
    return node
