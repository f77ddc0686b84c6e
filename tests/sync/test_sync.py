"""``vk sync`` against the real app and database: plans, uploads, deletes, waits, exit codes."""

import asyncio
import os
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from app.cli import cli
from app.documents.service import content_hash
from app.main import create_app
from app.sync import command as sync_command_module
from app.sync import planner
from app.sync.client import SyncClient
from app.sync.command import SyncOptions, batches, run_sync, sync_command
from app.sync.planner import LocalFile, RemoteDocument, Selection, make_plan, walk_folder
from tests.conftest import fake_resolver
from tests.helpers import CountingEmbedder, free_port, served

FILES = {
    "a.md": "# Parking\n\nParking is free on Sundays.",
    "b.txt": "Dogs are welcome inside the shop.",
    "sub/c.md": "# Returns\n\nReturns are accepted within thirty days.",
    "sub/d.html": "<html><body><p>We open at nine.</p></body></html>",
    # Never synced: hidden, in .git, of no supported type, or excluded below.
    ".hidden.md": "secret",
    ".git/config.txt": "[core]",
    "logo.png": "\x89PNG",
    "sub/wip.draft.md": "not yet",
}


def write(root: Path, files: dict[str, str]) -> None:
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)


async def stored(engine, kb_id: str) -> dict[str, tuple[str, str, object]]:
    """source_path → (status, content hash, indexed_at)."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT source_path, status, content_hash, indexed_at FROM documents WHERE kb_id = :kb"),
            {"kb": kb_id},
        )
        return {r.source_path: (r.status, r.content_hash, r.indexed_at) for r in rows}


class Run:
    """run_sync over the app's ASGI transport, its printed lines kept."""

    def __init__(self, http, kb_id: str, folder: Path) -> None:
        self.http, self.kb_id, self.folder = http, kb_id, folder
        self.lines: list[str] = []

    async def __call__(self, **options) -> int:
        self.lines = []
        options.setdefault("selection", Selection(exclude=("*.draft.md",)))
        return await run_sync(
            SyncOptions(self.folder, self.kb_id, poll_s=0.05, **options), self.http, self.lines.append
        )


async def new_kb(http, headers) -> str:
    r = await http.post("/api/knowledge", json={"title": "Synced"}, headers=headers)
    assert r.status_code == 201, r.text
    kb_id: str = r.json()["id"]
    return kb_id


async def test_first_sync_then_changes_and_deletions(app, org, engine, drain_queue, tmp_path):
    write(tmp_path, FILES)
    async with served(app) as http:
        http.headers.update(org.headers)
        kb_id = await new_kb(http, org.headers)
        run = Run(http, kb_id, tmp_path)
        assert await run() == 0
        assert run.lines == [
            f"sync {tmp_path} -> knowledge base {kb_id}: 4 files",
            "plan: 4 new, 0 changed, 0 unchanged, 0 to delete",
            "  new       a.md",
            "  new       b.txt",
            "  new       sub/c.md",
            "  new       sub/d.html",
            "uploaded 4/4: 4 created, 0 updated, 0 unchanged, 0 failed",
            "done: 4 created, 0 updated, 0 unchanged, 0 deleted, 0 failed",
        ]
        assert await drain_queue() == {"ready": 4}
        first = await stored(engine, kb_id)
        assert {p: (s, h) for p, (s, h, _) in first.items()} == {
            p: ("ready", content_hash(FILES[p].encode())) for p in ("a.md", "b.txt", "sub/c.md", "sub/d.html")
        }

        write(
            tmp_path, {"a.md": "# Parking\n\nParking costs two euros.", "sub/c.md": "Returns within a week."}
        )
        (tmp_path / "b.txt").unlink()
        assert await run(delete_missing=True, dry_run=True) == 0
        assert run.lines == [
            f"sync {tmp_path} -> knowledge base {kb_id}: 3 files",
            "plan: 0 new, 2 changed, 1 unchanged, 1 to delete",
            "  changed   a.md",
            "  changed   sub/c.md",
            "  delete    b.txt",
            "dry run: nothing was changed",
        ]
        assert await stored(engine, kb_id) == first

        counting = CountingEmbedder(app.state.embedder)
        app.state.embedder = counting
        assert await run(delete_missing=True) == 0
        assert run.lines[-3:] == [
            "deleted 1/1",
            "uploaded 2/2: 0 created, 2 updated, 0 unchanged, 0 failed",
            "done: 0 created, 2 updated, 0 unchanged, 1 deleted, 0 failed",
        ]
        assert await drain_queue() == {"ready": 2}
        assert counting.texts == 2  # one chunk for each changed file, nothing else
        second = await stored(engine, kb_id)
        assert sorted(second) == ["a.md", "sub/c.md", "sub/d.html"]
        assert second["a.md"][1] == content_hash(b"# Parking\n\nParking costs two euros.")
        assert second["sub/d.html"] == first["sub/d.html"]  # not indexed again

        assert await run(delete_missing=True) == 0
        assert run.lines[1:] == [
            "plan: 0 new, 0 changed, 3 unchanged, 0 to delete",
            "done: 0 created, 0 updated, 0 unchanged, 0 deleted, 0 failed",
        ]


async def test_documents_outside_the_selection_are_not_deleted(app, org, engine, tmp_path):
    write(tmp_path, {"docs/a.md": "Alpha.", "notes/b.md": "Bravo."})
    async with served(app) as http:
        http.headers.update(org.headers)
        kb_id = await new_kb(http, org.headers)
        await http.post(
            f"/api/knowledge/{kb_id}/documents", json={"title": "Manual", "content": "Added by hand."}
        )
        run = Run(http, kb_id, tmp_path)
        assert await run() == 0
        (tmp_path / "docs/a.md").unlink()
        (tmp_path / "notes/b.md").unlink()
        assert await run(selection=Selection(include=("docs/*",)), delete_missing=True) == 0
        assert run.lines[1:3] == ["plan: 0 new, 0 changed, 0 unchanged, 1 to delete", "  delete    docs/a.md"]
        # notes/ is outside --include, and the manual document has no path: both stay.
        assert sorted(await stored(engine, kb_id), key=str) == [None, "notes/b.md"]


async def test_a_file_refused_now_keeps_its_document_under_delete_missing(app, org, engine, tmp_path):
    # Refused files are not in the walk's list, and their documents were taken for deleted.
    write(tmp_path, {"a.md": "Alpha.", "manual.md": "The manual."})
    async with served(app) as http:
        http.headers.update(org.headers)
        kb_id = await new_kb(http, org.headers)
        run = Run(http, kb_id, tmp_path)
        assert await run() == 0
        (tmp_path / "manual.md").write_text("The manual, grown. " * 100)
        assert await run(delete_missing=True, max_file_bytes=1000) == 1
        assert run.lines[1] == "plan: 0 new, 0 changed, 1 unchanged, 0 to delete"
        assert sorted(await stored(engine, kb_id)) == ["a.md", "manual.md"]


async def test_a_failed_file_fails_the_sync_and_is_named(app, org, engine, tmp_path):
    write(tmp_path, {"good.md": "Fine.", "broken.pdf": "not a PDF at all"})
    async with served(app) as http:
        http.headers.update(org.headers)
        kb_id = await new_kb(http, org.headers)
        run = Run(http, kb_id, tmp_path)
        assert await run() == 1
        assert run.lines[-4:] == [
            "uploaded 2/2: 1 created, 0 updated, 0 unchanged, 1 failed",
            "done: 1 created, 0 updated, 0 unchanged, 0 deleted, 1 failed",
            "sync failed for 1 file(s):",
            "  broken.pdf: unsupported_media_type: the file is not a PDF (it has no PDF header); "
            "upload .txt, .md, .html, .pdf, .docx, .pptx, .xlsx or .csv",
        ]
        assert list(await stored(engine, kb_id)) == ["good.md"]


async def test_wait_until_indexed_and_fail_on_an_indexing_failure(
    database_url, settings, org, engine, tmp_path
):
    app = create_app(settings, database_url=database_url, resolver=fake_resolver, run_workers=True)
    write(tmp_path, {"hours.md": "We open at nine.", "blank.html": "<html><body></body></html>"})
    async with served(app) as http:
        http.headers.update(org.headers)
        kb_id = await new_kb(http, org.headers)
        run = Run(http, kb_id, tmp_path)
        assert await run(wait=True) == 1
        assert (
            run.lines[-5:]
            == [
                "indexing: 1 ready, 1 failed, 0 waiting",
                "done: 2 created, 0 updated, 0 unchanged, 0 deleted, 1 failed",
                "sync failed for 1 file(s):",
                "  blank.html: indexing failed: the document contains no extractable text",
            ][-5:]
            or run.lines
        )
        statuses = {p: s for p, (s, _, _) in (await stored(engine, kb_id)).items()}
        assert statuses == {"hours.md": "ready", "blank.html": "failed"}


async def test_service_problems_stop_the_sync(app, org, other_org, tmp_path):
    write(tmp_path, {"a.md": "Alpha."})
    async with served(app) as http:
        theirs = await new_kb(http, other_org.headers)
        http.headers.update(org.headers)
        run = Run(http, theirs, tmp_path)
        assert await run() == 3
        assert run.lines == [
            f"error: knowledge base {theirs} not found in the API key's organisation (GET /api/knowledge lists them)"
        ]
        http.headers["Authorization"] = "Bearer vk_wrong"
        assert await run() == 3
        assert run.lines[0].startswith("error: the API key was refused: ")


def test_an_unreachable_service_or_no_key_stops_the_sync(tmp_path):
    lines: list[str] = []
    url = f"http://127.0.0.1:{free_port()}"
    options = SyncOptions(tmp_path, "kb")
    assert sync_command(options, url=url, api_key="vk_x", say=lines.append) == 3
    assert lines[0].startswith(f"error: cannot reach the service at {url} (ConnectError")
    lines.clear()
    assert sync_command(options, url=url, api_key=None, say=lines.append) == 2
    assert lines == ["error: set VK_API_KEY to an admin API key of the knowledge base's organisation"]


def test_the_cli_command_reads_its_key_and_url_from_the_environment(tmp_path):
    port = free_port()
    result = CliRunner().invoke(
        cli,
        ["sync", str(tmp_path), "--kb", KB],
        env={"VK_API_KEY": "vk_x", "VK_URL": f"http://127.0.0.1:{port}"},
    )
    assert result.exit_code == 3
    assert f"cannot reach the service at http://127.0.0.1:{port}" in result.output
    result = CliRunner().invoke(
        cli, ["sync", str(tmp_path / "missing"), "--kb", KB], env={"VK_API_KEY": "vk_x"}
    )
    assert (result.exit_code, result.output) == (2, f"error: {tmp_path / 'missing'} is not a folder\n")


KB = "5d0f9a8e-2c1b-4e7a-9f3d-6b8c1a2e4f70"


def test_the_cli_command_refuses_a_knowledge_base_id_that_is_no_uuid(tmp_path):
    # Pasted into the URL, "../agents" reached another route ("no such route", exit 3).
    result = CliRunner().invoke(cli, ["sync", str(tmp_path), "--kb", "../agents"], env={"VK_API_KEY": "vk_x"})
    assert (result.exit_code, "Invalid value for '--kb'" in result.output) == (2, True)


@pytest.mark.parametrize(
    ("path", "selection", "selected"),
    [
        ("a.md", Selection(), True),
        ("a.docx.exe", Selection(), False),
        ("sub/.cache/a.md", Selection(), False),
        ("sub/x.draft.md", Selection(exclude=("*.draft.md",)), False),
        ("docs/deep/a.md", Selection(include=("docs/*",)), True),
        ("other/a.md", Selection(include=("docs/*",)), False),
        ("docs/a.md", Selection(include=("docs/*",), exclude=("a.md",)), False),
    ],
)
def test_selection(path, selection, selected):
    assert selection.selects(path) is selected


def test_batches_hold_to_files_and_bytes():
    files = [
        LocalFile(f"{n}.txt", Path(f"{n}.txt"), size, "h") for n, size in enumerate([4, 4, 4, 10, 1, 1, 1])
    ]
    assert [[f.path for f in b] for b in batches(files, 3, 8)] == [
        ["0.txt", "1.txt"],
        ["2.txt"],
        ["3.txt"],
        ["4.txt", "5.txt", "6.txt"],
    ]


async def test_a_rate_limited_request_waits_and_is_sent_again(respx_mock):
    listing = respx_mock.get(
        "http://vk.test/api/knowledge/kb-1/documents", params={"limit": "200", "offset": "0"}
    ).mock(
        side_effect=[
            httpx.Response(
                429, headers={"Retry-After": "1"}, json={"error": "rate_limited", "detail": "slow down"}
            ),
            httpx.Response(
                200,
                json={
                    "items": [
                        {
                            "id": "d1",
                            "source_path": "a.md",
                            "content_hash": "h",
                            "status": "ready",
                            "error": None,
                        }
                    ],
                    "total": 1,
                    "limit": 200,
                    "offset": 0,
                },
            ),
        ]
    )
    async with httpx.AsyncClient(base_url="http://vk.test", headers={"Authorization": "Bearer vk_k"}) as http:
        assert await SyncClient(http, "kb-1").documents() == [RemoteDocument("d1", "a.md", "h", "ready")]
    assert [
        (c.request.method, str(c.request.url), c.request.headers["Authorization"]) for c in listing.calls
    ] == [("GET", "http://vk.test/api/knowledge/kb-1/documents?limit=200&offset=0", "Bearer vk_k")] * 2


# --- the folder walk, against hostile folders ------------------------------------------------


def test_a_link_is_followed_only_to_a_file_inside_the_folder(tmp_path):
    root, outside = tmp_path / "site", tmp_path / "outside"
    write(root, {"a.md": "Alpha."})
    write(outside, {"secret.txt": "VK_API_KEY=sk-live"})
    (root / "alias.md").symlink_to(root / "a.md")
    (root / "env.txt").symlink_to("/proc/self/environ")
    (root / "leak.md").symlink_to(outside / "secret.txt")
    walk = walk_folder(root, Selection())
    assert ([f.path for f in walk.files], walk.refused) == (
        ["a.md", "alias.md"],
        [
            ("env.txt", "a link to a file outside the folder is not synced"),
            ("leak.md", "a link to a file outside the folder is not synced"),
        ],
    )


def test_a_link_to_a_hidden_or_excluded_file_inside_is_not_followed(tmp_path):
    # .git/config holds a CI job's token; .env the service's keys.
    write(
        tmp_path,
        {"a.md": "Alpha.", ".git/config": "token=ghs_x", ".env": "OPENAI_API_KEY=sk", "x.draft.md": "X."},
    )
    (tmp_path / "leak.md").symlink_to(tmp_path / ".git" / "config")
    (tmp_path / "env.txt").symlink_to(".env")
    (tmp_path / "draft.md").symlink_to("x.draft.md")
    walk = walk_folder(tmp_path, Selection(exclude=("*.draft.md",)))
    assert ([f.path for f in walk.files], walk.refused) == (
        ["a.md"],
        [
            ("draft.md", "a link to a hidden or excluded file is not synced"),
            ("env.txt", "a link to a hidden or excluded file is not synced"),
            ("leak.md", "a link to a hidden or excluded file is not synced"),
        ],
    )


def test_a_name_that_is_not_utf8_or_a_file_too_large_is_refused_unread(tmp_path):
    write(tmp_path, {"a.md": "Alpha.", "big.txt": "x" * 2048})
    with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.md"), "wb") as latin1_named:
        latin1_named.write(b"Latin-1 name.")
    walk = walk_folder(tmp_path, Selection(), max_file_bytes=1024)
    assert ([f.path for f in walk.files], walk.refused) == (
        ["a.md"],
        [
            (
                "big.txt",
                "2,048 bytes, over LIMITS__MAX_UPLOAD_BYTES here (1,024): not sent "
                "(set it as the service has it, if that is larger)",
            ),
            ("caf\\xe9.md", "the name is not valid UTF-8"),
        ],
    )


def test_a_folder_that_cannot_be_read_keeps_its_documents(tmp_path, monkeypatch):
    write(tmp_path, {"a.md": "Alpha.", "locked/x.md": "Locked."})
    real_scandir = os.scandir

    def scandir(path):
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    walk = walk_folder(tmp_path, Selection())
    remote = [RemoteDocument("1", "a.md", None, "ready"), RemoteDocument("2", "locked/x.md", None, "ready")]
    plan = make_plan(walk.files, remote, selection=Selection(), delete_missing=True, unread=walk.unread)
    assert (walk.refused, walk.unread, plan.delete) == (
        [("locked/", "the folder could not be read (Permission denied)")],
        ["locked"],
        [],
    )


def test_two_files_of_one_path_are_not_both_synced(tmp_path):
    # On Linux a backslash is part of a name; the service reads it as a folder separator.
    write(tmp_path, {"sub\\b.md": "One.", "sub/b.md": "Two."})
    walk = walk_folder(tmp_path, Selection())
    assert ([(f.path, f.location.name) for f in walk.files], walk.refused) == (
        [("sub/b.md", "sub\\b.md")],
        [("sub/b.md", "another file, sub\\b.md, has the same path (sub/b.md)")],
    )


def test_a_file_that_cannot_be_read_is_refused_and_the_rest_walked(tmp_path, monkeypatch):
    write(tmp_path, {"a.md": "Alpha.", "b.md": "Bravo."})
    real_hash = planner.file_content_hash

    def file_content_hash(stream):
        if stream.name.endswith("a.md"):
            raise OSError(5, "Input/output error")
        return real_hash(stream)

    monkeypatch.setattr(planner, "file_content_hash", file_content_hash)
    walk = walk_folder(tmp_path, Selection())
    assert ([f.path for f in walk.files], walk.refused) == (
        ["b.md"],
        [("a.md", "the file could not be read (Input/output error)")],
    )


async def test_an_interrupted_sync_says_what_it_did_and_a_second_run_finishes(
    app, org, engine, tmp_path, monkeypatch
):
    write(tmp_path, {"a.md": "Alpha.", "b.md": "Bravo.", "c.md": "Charlie."})
    async with served(app) as http:
        http.headers.update(org.headers)
        kb_id = await new_kb(http, org.headers)
        run = Run(http, kb_id, tmp_path)
        real_read = sync_command_module._read
        batches_read: list[int] = []

        def read(files, outcome):
            batches_read.append(len(files))
            if len(batches_read) == 2:
                raise asyncio.CancelledError  # Ctrl-C, as asyncio.run delivers it
            return real_read(files, outcome)

        monkeypatch.setattr(sync_command_module, "_read", read)
        with pytest.raises(asyncio.CancelledError):
            await run(batch_files=1)
        assert run.lines[-2:] == [
            "done: 1 created, 0 updated, 0 unchanged, 0 deleted, 0 failed",
            "interrupted: run the same vk sync again to finish (files already sent are unchanged)",
        ]
        monkeypatch.setattr(sync_command_module, "_read", real_read)
        assert await run(batch_files=1) == 0
        assert run.lines[-1] == "done: 2 created, 0 updated, 0 unchanged, 0 deleted, 0 failed"
        assert sorted(await stored(engine, kb_id)) == ["a.md", "b.md", "c.md"]


def test_ctrl_c_ends_the_command_with_130(monkeypatch):
    async def interrupted(options, http, say):
        raise KeyboardInterrupt

    monkeypatch.setattr(sync_command_module, "run_sync", interrupted)
    options = SyncOptions(Path("."), KB)
    assert sync_command_module.sync_command(options, url="http://vk.test", api_key="vk_x", say=print) == 130


async def test_a_file_replaced_after_the_walk_is_not_sent(app, org, engine, tmp_path, monkeypatch):
    write(tmp_path, {"a.md": "Alpha.", "b.md": "Bravo."})
    async with served(app) as http:
        http.headers.update(org.headers)
        kb_id = await new_kb(http, org.headers)
        run = Run(http, kb_id, tmp_path)
        real_read = sync_command_module._read

        def read(files, outcome):
            (tmp_path / "a.md").unlink()
            (tmp_path / "a.md").symlink_to("/etc/passwd")  # swapped in after the walk checked it
            return real_read(files, outcome)

        monkeypatch.setattr(sync_command_module, "_read", read)
        assert await run() == 1
        assert run.lines[-2:] == [
            "sync failed for 1 file(s):",
            "  a.md: the file changed since the folder was read; sync again",
        ]
        assert list(await stored(engine, kb_id)) == ["b.md"]


async def test_a_file_gone_before_its_upload_fails_alone_and_names_are_said_escaped(
    app, org, engine, tmp_path, monkeypatch
):
    write(tmp_path, {"a.md": "Alpha.", "b.md": "Bravo.", "c\x1b[2J.md": "Cleared screen."})
    async with served(app) as http:
        http.headers.update(org.headers)
        kb_id = await new_kb(http, org.headers)
        run = Run(http, kb_id, tmp_path)
        real_read = sync_command_module._read

        def read(files, outcome):
            (tmp_path / "a.md").unlink(missing_ok=True)  # deleted after the walk
            return real_read(files, outcome)

        monkeypatch.setattr(sync_command_module, "_read", read)
        assert await run() == 1
        assert run.lines[-3:] == [
            "sync failed for 2 file(s):",
            "  'c\\x1b[2J.md': the path must not contain control characters",
            "  a.md: the file could not be read (No such file or directory)",
        ]
        assert list(await stored(engine, kb_id)) == ["b.md"]
