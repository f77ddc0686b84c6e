"""API keys: made from 256 random bits, shown once, stored as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.base import utcnow
from app.errors import Conflict, NotFound
from app.keys.models import ApiKey
from app.keys.repository import ApiKeyRepository
from app.keys.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyRead
from app.organisations.models import Organisation
from app.schemas import Page

Role = Literal["admin", "query"]
KEY_PREFIX = "vk_"
VISIBLE_CHARS = 12


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def visible_prefix(key: str) -> str:
    return key[:VISIBLE_CHARS]


class ApiKeyService:
    """Create, list and revoke an organisation's keys."""

    def __init__(self, session: AsyncSession, org_id: uuid.UUID) -> None:
        self.session = session
        self.repo = ApiKeyRepository(session, org_id)

    async def page(self, *, limit: int, offset: int) -> Page[ApiKeyRead]:
        rows, total = await self.repo.page(limit=limit, offset=offset)
        return Page(
            items=[ApiKeyRead.model_validate(r, from_attributes=True) for r in rows],
            total=total,
            limit=limit,
            offset=offset,
        )

    async def create(self, data: ApiKeyCreate) -> ApiKeyCreated:
        key = generate_key()
        row = ApiKey(
            org_id=self.repo.org_id,
            name=data.name,
            prefix=visible_prefix(key),
            key_hash=hash_key(key),
            role=data.role,
        )
        self.repo.add(row)
        await self.session.commit()
        return ApiKeyCreated(**ApiKeyRead.model_validate(row, from_attributes=True).model_dump(), key=key)

    async def read(self, key_id: uuid.UUID) -> ApiKeyRead:
        """One key (never its secret), revoked ones included."""
        key = await self.repo.get(key_id)
        if key is None:
            raise NotFound("API key not found")
        return ApiKeyRead.model_validate(key, from_attributes=True)

    async def revoke(self, key_id: uuid.UUID) -> None:
        key = await self.repo.get(key_id)
        if key is None or key.revoked_at is not None:
            raise NotFound("API key not found")
        if key.role == "admin":
            # Locked until commit, so concurrent revocations cannot all pass the check and
            # leave the organisation without an admin key.
            admins = await self.repo.lock_active_admins()
            if key_id not in admins:
                raise NotFound("API key not found")  # revoked while this request waited
            if len(admins) <= 1:
                raise Conflict("this is the organisation's last admin key; create another admin key first")
        if not await self.repo.revoke(key_id, utcnow()):
            raise NotFound("API key not found")  # a query key revoked by a concurrent request
        await self.session.commit()


async def create_organisation(session: AsyncSession, name: str) -> tuple[uuid.UUID, str]:
    """Create an organisation and its first admin key; returns (org id, key shown once)."""
    org = Organisation(name=name)
    session.add(org)
    await session.flush()
    key = generate_key()
    session.add(
        ApiKey(
            org_id=org.id,
            name="first admin key",
            prefix=visible_prefix(key),
            key_hash=hash_key(key),
            role="admin",
        )
    )
    await session.commit()
    return org.id, key
