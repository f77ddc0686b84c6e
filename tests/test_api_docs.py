"""The API reference at /schema loads nothing from outside the service (Chromium renders it
offline in tests/browser/test_api_reference.py)."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from app.api_docs import as_openapi_30

EXPECTED_TYPES = {
    "/schema/assets/swagger-ui.css": "text/css; charset=utf-8",
    "/schema/assets/swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "/schema/assets/swagger-ui-standalone-preset.js": "text/javascript; charset=utf-8",
    "/schema/assets/favicon-32x32.png": "image/png",
}


class References(HTMLParser):
    """Every URL a page makes the browser load: src and href attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in {"src", "href"} and value is not None]


@pytest.mark.parametrize("path", ["/schema", "/schema/swagger"])
async def test_the_reference_page_loads_only_the_services_own_files(client, path):
    r = await client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    parser = References()
    parser.feed(r.text)
    assert sorted(parser.urls) == sorted(EXPECTED_TYPES)
    assert "cdn.jsdelivr.net" not in r.text
    for url, content_type in EXPECTED_TYPES.items():
        asset = await client.get(url)
        assert (url, asset.status_code, asset.headers["content-type"]) == (url, 200, content_type)
        assert len(asset.content) > 500


@pytest.mark.parametrize("name", ["index.html", "swagger-initializer.js", "swagger-ui.js.map", "nothing.js"])
async def test_only_the_pages_assets_are_served(client, name):
    r = await client.get(f"/schema/assets/{name}")
    assert r.status_code == 404
    assert r.json() == {"error": "not_found", "detail": f"no asset {name!r}"}


async def test_the_page_shows_a_30_rendition_and_openapi_json_stays_31(client):
    page = (await client.get("/schema")).text
    document = (await client.get("/schema/openapi.json")).json()
    assert document["openapi"] == "3.1.0"
    assert '"openapi":"3.0.3"' in page
    assert '"openapi":"3.1.0"' not in page


def test_null_alternatives_become_nullable():
    document = {
        "openapi": "3.1.0",
        "components": {
            "schemas": {
                "A": {
                    "properties": {
                        "title": {"oneOf": [{"type": "string"}, {"type": "null"}], "description": "d"},
                        "kb": {"anyOf": [{"$ref": "#/components/schemas/B"}, {"type": "null"}]},
                        "tag": {"type": ["null", "string"]},
                        "any": {"type": ["integer", "string", "null"]},
                        "either": {"oneOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
                        "kept": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                    }
                }
            }
        },
    }
    assert as_openapi_30(document) == {
        "openapi": "3.0.3",
        "components": {
            "schemas": {
                "A": {
                    "properties": {
                        "title": {"type": "string", "nullable": True, "description": "d"},
                        "kb": {"allOf": [{"$ref": "#/components/schemas/B"}], "nullable": True},
                        "tag": {"type": "string", "nullable": True},
                        "any": {"anyOf": [{"type": "integer"}, {"type": "string"}], "nullable": True},
                        "either": {"oneOf": [{"type": "integer"}, {"type": "string"}], "nullable": True},
                        "kept": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                    }
                }
            }
        },
    }
    # The document served as openapi.json is not touched.
    assert document["openapi"] == "3.1.0"
    assert document["components"]["schemas"]["A"]["properties"]["tag"] == {"type": ["null", "string"]}
