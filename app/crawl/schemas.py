from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

from app.schemas import Input, JsonInteger, NoNul, Url

MAX_DEPTH = 10
MAX_PATTERNS = 20
MIN_SYNC_INTERVAL_S = 300
MAX_SYNC_INTERVAL_S = 30 * 86_400


def _path_glob(value: str) -> str:
    if not value.startswith(("/", "*")):
        raise PydanticCustomError(
            "path_pattern", "a pattern matches the URL's path, so it starts with / or * (e.g. /docs/*)"
        )
    return value


# A glob on the URL's path (fnmatch: * also crosses /), so it starts where a path starts.
Pattern = Annotated[str, StringConstraints(min_length=1, max_length=300), NoNul, AfterValidator(_path_glob)]


def _sync_interval(value: int) -> int:
    if 0 < value < MIN_SYNC_INTERVAL_S:
        raise PydanticCustomError(
            "sync_interval", "at least {minimum} s, or 0 for never", {"minimum": MIN_SYNC_INTERVAL_S}
        )
    return value


# 0 (never) or MIN_SYNC_INTERVAL_S to MAX_SYNC_INTERVAL_S: a re-crawl walks a whole site.
SyncInterval = Annotated[
    int,
    Field(ge=0, le=MAX_SYNC_INTERVAL_S),
    JsonInteger,
    AfterValidator(_sync_interval),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "const": 0},
                {"type": "integer", "minimum": MIN_SYNC_INTERVAL_S, "maximum": MAX_SYNC_INTERVAL_S},
            ]
        }
    ),
]


class CrawlCreate(Input):
    url: Url = Field(description="Where the crawl starts; its host (and www./no www.) is the site.")
    max_depth: Annotated[int, Field(ge=0, le=MAX_DEPTH), JsonInteger] = Field(
        3,
        description="Links followed from the start page (0: the start page only; sitemap pages are depth 1).",
    )
    max_pages: Annotated[int, Field(ge=1), JsonInteger] | None = Field(
        None,
        description="Most pages kept; default CRAWL__MAX_PAGES_DEFAULT (200), "
        "at most CRAWL__MAX_PAGES_LIMIT.",
    )
    include_patterns: list[Pattern] = Field(
        default_factory=list,
        max_length=MAX_PATTERNS,
        description="Globs on the URL path (`/docs/*`); given, only matching pages are kept.",
    )
    exclude_patterns: list[Pattern] = Field(
        default_factory=list,
        max_length=MAX_PATTERNS,
        description="Globs on the URL path (`/blog/*`); matching pages are neither fetched nor kept.",
    )
    use_sitemap: bool = Field(True, description="Read robots.txt Sitemap: lines, else /sitemap.xml.")
    sync_interval_s: SyncInterval | None = Field(
        None, description=f"Re-crawl this often (at least {MIN_SYNC_INTERVAL_S} s); 0 or absent = never."
    )


class CrawlProgress(BaseModel):
    found: int = Field(description="Distinct in-scope URLs found (start page, sitemaps, links).")
    read: int = Field(description="Pages fetched in full with new or changed content, queued for indexing.")
    unchanged: int = Field(description="Pages the site answered 304 to, or with the same content.")
    failed: int = Field(description="Pages that could not be fetched (see problems).")
    skipped: int = Field(description="Pages not kept: robots.txt, not HTML, off-site redirect, duplicate.")
    retired: int = Field(description="Pages of earlier runs deleted: gone (404/410) or no longer reachable.")


class CrawlProblem(BaseModel):
    url: str
    reason: str


class CrawlRead(BaseModel):
    id: uuid.UUID
    kb_id: uuid.UUID
    start_url: str
    max_depth: int
    max_pages: int
    include_patterns: list[str]
    exclude_patterns: list[str]
    use_sitemap: bool
    sync_interval_s: int | None
    next_run_at: datetime | None
    status: str = Field(description="queued | running | completed | failed | cancelled")
    cancel_requested: bool
    progress: CrawlProgress
    problems: list[CrawlProblem] = Field(description="The first pages that failed, with why (at most 20).")
    error: str | None
    documents: int = Field(description="Pages of this crawl held in the knowledge base now.")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
