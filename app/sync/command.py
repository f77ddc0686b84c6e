"""``vk sync``: plan, print the plan, then carry it out in batches and say how it went.

Exit codes: 0 the knowledge base now mirrors the folder (with ``--wait``: and every sent
file is indexed); 1 some files failed (each is named) or ``--wait`` ran out of time;
2 the command was given wrong (no API key, no such folder); 3 the service could not be
used: unreachable, the key refused, the knowledge base unknown.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.documents.service import content_hash
from app.sync.client import BatchRefused, ServiceError, SyncClient
from app.sync.planner import LocalFile, Plan, Selection, describe, make_plan, unreadable_file, walk_folder

OK, FAILED, USAGE, UNAVAILABLE = 0, 1, 2, 3
INTERRUPTED = 130  # Ctrl-C, as a shell counts it
Say = Callable[[str], None]


@dataclass(frozen=True)
class SyncOptions:
    folder: Path
    kb_id: str
    selection: Selection = field(default_factory=Selection)
    delete_missing: bool = False
    dry_run: bool = False
    wait: bool = False
    wait_timeout_s: float = 1800.0
    poll_s: float = 2.0
    batch_files: int = 50
    batch_bytes: int = 8 * 1024 * 1024
    allow_duplicates: bool = False
    max_file_bytes: int | None = None  # larger files are refused unread


@dataclass
class Outcome:
    counts: dict[str, int] = field(
        default_factory=lambda: {"created": 0, "updated": 0, "unchanged": 0, "failed": 0, "deleted": 0}
    )
    failures: list[tuple[str, str]] = field(default_factory=list)
    sent: dict[str, str] = field(default_factory=dict)  # document id → path, to wait for


async def run_sync(options: SyncOptions, http: httpx.AsyncClient, say: Say) -> int:
    """Sync ``options.folder`` into the KB through ``http`` (its base URL and key set);
    the exit code."""
    if not options.folder.is_dir():
        say(f"error: {options.folder} is not a folder")
        return USAGE
    client = SyncClient(http, options.kb_id)
    walk = walk_folder(options.folder, options.selection, max_file_bytes=options.max_file_bytes)
    try:
        documents = await client.documents()
    except (ServiceError, BatchRefused) as exc:
        say(f"error: {exc}")
        return UNAVAILABLE
    plan = make_plan(
        walk.files,
        documents,
        selection=options.selection,
        delete_missing=options.delete_missing,
        unread=walk.unread,
        held=walk.held,
    )
    say(f"sync {options.folder} -> knowledge base {options.kb_id}: {len(walk.files)} files")
    for line in describe(plan):
        say(line)
    outcome = Outcome(failures=[(path, reason) for path, reason in walk.refused])
    if options.dry_run:
        say("dry run: nothing was changed")
        return _finish(outcome, say)
    try:
        await _delete(client, plan, outcome, say)
        await _upload(client, plan, options, outcome, say)
        if options.wait and outcome.sent:
            await _wait(client, options, outcome, say)
    except ServiceError as exc:
        say(f"error: {exc}")
        _summary(outcome, say)
        return UNAVAILABLE
    except asyncio.CancelledError:  # Ctrl-C: what was done is said; a second run does the rest
        _summary(outcome, say)
        say("interrupted: run the same vk sync again to finish (files already sent are unchanged)")
        raise
    _summary(outcome, say)
    return _finish(outcome, say)


async def _delete(client: SyncClient, plan: Plan, outcome: Outcome, say: Say) -> None:
    # Before the uploads: a renamed file's new path then finds no document holding its
    # content, which would make it a duplicate.
    for start in range(0, len(plan.delete), 100):
        batch = plan.delete[start : start + 100]
        try:
            items = await client.delete([d.id for d in batch])
        except BatchRefused as exc:
            outcome.failures += [(d.path, f"not deleted: {exc}") for d in batch]
            continue
        outcome.counts["deleted"] += sum(1 for i in items if i["status"] == "deleted")
        say(f"deleted {min(start + 100, len(plan.delete))}/{len(plan.delete)}")


async def _upload(client: SyncClient, plan: Plan, options: SyncOptions, outcome: Outcome, say: Say) -> None:
    uploads = plan.uploads
    done = 0
    for planned in batches(uploads, options.batch_files, options.batch_bytes):
        batch, contents = _read(planned, outcome)
        try:
            items = await client.upload(batch, contents, allow_duplicate=options.allow_duplicates)
        except BatchRefused as exc:
            outcome.counts["failed"] += len(batch)
            outcome.failures += [(f.path, str(exc)) for f in batch]
        else:
            for file, item in zip(batch, items, strict=True):
                outcome.counts[item["status"]] += 1
                if item["status"] == "failed":
                    outcome.failures.append((file.path, f"{item['error']}: {item['detail']}"))
                elif item["status"] != "unchanged":
                    outcome.sent[item["document"]["id"]] = file.path
        done += len(planned)
        c = outcome.counts
        say(
            f"uploaded {done}/{len(uploads)}: {c['created']} created, {c['updated']} updated, "
            f"{c['unchanged']} unchanged, {c['failed']} failed"
        )


def _read(files: Sequence[LocalFile], outcome: Outcome) -> tuple[list[LocalFile], list[bytes]]:
    """The files that can still be read, and their bytes; the others are failures."""
    readable, contents = [], []
    for file in files:
        try:
            data = file.location.read_bytes()
        except OSError as exc:  # gone, or made unreadable, since the walk
            outcome.counts["failed"] += 1
            outcome.failures.append((file.path, unreadable_file(exc)))
            continue
        # Only what the walk read and checked is sent: a file replaced since (by a link to
        # /etc/passwd, say) is not.
        if content_hash(data) != file.hash:
            outcome.counts["failed"] += 1
            outcome.failures.append((file.path, "the file changed since the folder was read; sync again"))
            continue
        readable.append(file)
        contents.append(data)
    return readable, contents


def batches(files: Sequence[LocalFile], max_files: int, max_bytes: int) -> list[list[LocalFile]]:
    """Files in order, grouped at most ``max_files`` and (but for a file larger on its own)
    ``max_bytes`` at a time."""
    groups: list[list[LocalFile]] = []
    size = 0
    for file in files:
        if not groups or len(groups[-1]) >= max_files or (groups[-1] and size + file.size > max_bytes):
            groups.append([])
            size = 0
        groups[-1].append(file)
        size += file.size
    return groups


async def _wait(client: SyncClient, options: SyncOptions, outcome: Outcome, say: Say) -> None:
    deadline = time.monotonic() + options.wait_timeout_s
    waiting = dict(outcome.sent)
    ready = failed = 0
    last = ""
    while waiting:
        statuses = await client.statuses()
        for doc_id in list(waiting):
            status, error = statuses.get(doc_id, ("deleted", "deleted while the sync waited"))
            if status == "ready":
                ready += 1
            elif status in ("failed", "deleted"):
                failed += 1
                outcome.failures.append((waiting[doc_id], f"indexing failed: {error}"))
            else:
                continue
            del waiting[doc_id]
        line = f"indexing: {ready} ready, {failed} failed, {len(waiting)} waiting"
        if line != last:
            say(line)
            last = line
        if waiting and time.monotonic() >= deadline:
            outcome.failures += [(p, "not indexed within --wait-timeout") for p in sorted(waiting.values())]
            return
        if waiting:
            await asyncio.sleep(options.poll_s)


def _summary(outcome: Outcome, say: Say) -> None:
    c = outcome.counts
    say(
        f"done: {c['created']} created, {c['updated']} updated, {c['unchanged']} unchanged, "
        f"{c['deleted']} deleted, {len(outcome.failures)} failed"
    )


def _finish(outcome: Outcome, say: Say) -> int:
    if not outcome.failures:
        return OK
    say(f"sync failed for {len(outcome.failures)} file(s):")
    for path, reason in outcome.failures:
        # A file name may hold a line break or a terminal's control codes: said escaped.
        say(f"  {path if path.isprintable() else ascii(path)}: {reason}")
    return FAILED


def sync_command(options: SyncOptions, *, url: str, api_key: str | None, say: Say) -> int:
    """``vk sync`` from the command line: the key from the environment, a real HTTP client."""
    if not api_key:
        say("error: set VK_API_KEY to an admin API key of the knowledge base's organisation")
        return USAGE

    async def run() -> int:
        headers = {"Authorization": f"Bearer {api_key}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
            return await run_sync(options, http, say)

    try:
        return asyncio.run(run())
    except KeyboardInterrupt:
        return INTERRUPTED
