"""SQL over the organisations table as a whole, for the command line (the API only ever
reads its own organisation, through the keys that authenticate it)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.organisations.models import Organisation


async def count_organisations(session: AsyncSession) -> int:
    total = await session.scalar(select(func.count()).select_from(Organisation))
    return int(total or 0)
