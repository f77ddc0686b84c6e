"""Concurrent key revocations, through the app with requests really in flight together.

The test client hands each request to a portal thread one at a time, so ``asyncio.gather``
on it never overlaps two requests; here the app runs in the test's own event loop behind
an ASGI transport instead.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from tests.helpers import bearer, create_key, served


async def _active_admins(engine, org_id) -> int:
    async with engine.connect() as conn:
        return int(
            (
                await conn.execute(
                    text(
                        "SELECT count(*) FROM api_keys WHERE org_id = :o AND role = 'admin' AND revoked_at IS NULL"
                    ),
                    {"o": org_id},
                )
            ).scalar_one()
        )


async def test_ring_of_admins_revoking_each_other_leaves_one_admin_key(app, org, engine):
    """Admin i revokes admin i+1, all at once: each revocation checked the count before any
    had committed, all succeeded, and the organisation was left with no admin key.

    The test holds the admin keys' row locks until all six revocations wait on them, so every
    request has authenticated before the first revocation commits; otherwise a key revoked
    early fails its own request's authentication (401), which is right but not the race."""
    n = 6
    async with served(app) as client:
        own = (await client.get("/api/keys", headers=org.headers)).json()["items"][0]
        ring = [(own["id"], org.admin_key)]
        for _ in range(n - 1):
            created = await create_key(client, org.headers, "admin")
            ring.append((created["id"], created["key"]))
        for _, key in ring:  # stamped now, so authenticating needs no lock on the key's row
            assert (await client.get("/api/keys", headers=bearer(key))).status_code == 200
        async with engine.connect() as holder:
            await holder.execute(
                text("SELECT id FROM api_keys WHERE org_id = :o AND role = 'admin' FOR UPDATE"),
                {"o": org.id},
            )
            revocations = asyncio.gather(
                *(
                    client.delete(f"/api/keys/{ring[(i + 1) % n][0]}", headers=bearer(ring[i][1]))
                    for i in range(n)
                )
            )
            await _until_waiting_on_locks(engine, n)
            await holder.rollback()
        answers = await revocations
    assert sorted(a.status_code for a in answers) == [204] * (n - 1) + [409]
    [refused] = [a for a in answers if a.status_code == 409]
    assert refused.json() == {
        "error": "conflict",
        "detail": "this is the organisation's last admin key; create another admin key first",
    }
    assert await _active_admins(engine, org.id) == 1


async def _until_waiting_on_locks(engine, n: int) -> None:
    """Return once n backends wait on a row lock of api_keys; fail after 30 s."""
    sql = text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE wait_event_type = 'Lock' AND query LIKE '%api_keys%FOR UPDATE%'"
    )
    for _ in range(600):
        async with engine.connect() as conn:
            if (await conn.execute(sql)).scalar_one() == n:
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{n} revocations never all waited on the admin keys' locks")


@pytest.mark.parametrize("role", ["admin", "query"])
async def test_same_key_revoked_concurrently_is_revoked_once(app, org, engine, role):
    async with served(app) as client:
        target = await create_key(client, org.headers, role)
        answers = await asyncio.gather(
            *(client.delete(f"/api/keys/{target['id']}", headers=org.headers) for _ in range(8))
        )
    assert sorted(a.status_code for a in answers) == [204] + [404] * 7
    assert await _active_admins(engine, org.id) == 1
