"""Small helpers shared by the API tests."""

from __future__ import annotations

from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient

Client = AsyncTestClient[Litestar]


async def create_kb(
    client: Client, headers: dict[str, str], title: str = "Support FAQ", **extra: Any
) -> dict[str, Any]:
    r = await client.post("/api/knowledge", json={"title": title, **extra}, headers=headers)
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


async def create_text_doc(
    client: Client, headers: dict[str, str], kb_id: str, content: str = "We open at nine.", **extra: Any
) -> dict[str, Any]:
    payload = {"title": "Opening hours", "content": content, **extra}
    r = await client.post(f"/api/knowledge/{kb_id}/documents", json=payload, headers=headers)
    assert r.status_code == 202, r.text
    body: dict[str, Any] = r.json()
    return body


async def create_key(client: Client, headers: dict[str, str], role: str = "query") -> dict[str, Any]:
    r = await client.post("/api/keys", json={"role": role, "name": f"{role} key"}, headers=headers)
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
