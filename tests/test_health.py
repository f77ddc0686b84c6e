async def test_health_needs_no_key(client):
    r = await client.get("/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


async def test_ready_checks_database(client):
    r = await client.get("/ready")
    assert r.status_code == 200
    assert r.json() == {"status": "ready", "checks": {"database": "ok"}}


async def test_openapi_documents_every_route(client, app):
    r = await client.get("/schema/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    paths = set(spec["paths"])
    for route in app.routes:
        # The console's pages are not API routes (include_in_schema=False), nor / that leads there.
        if route.path.startswith(("/schema", "/console")) or route.path in ("/metrics", "/"):
            continue
        documented = route.path.replace(":str}", "}").replace(":uuid}", "}")
        assert documented in paths, route.path
    assert "bearer" in spec["components"]["securitySchemes"]


async def test_unknown_route_uses_error_shape(client):
    r = await client.get("/nope")
    assert r.status_code == 404
    assert r.json() == {"error": "not_found", "detail": "no such route"}
