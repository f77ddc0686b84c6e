"""What `vk serve` prints for the person who started it (app/startup.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from app.config import Settings
from app.startup import (
    answerer_text,
    count_organisations_at,
    embedder_text,
    ingestion_text,
    organisation_count,
    service_url,
    startup_text,
    vk_command,
    without_password,
)
from tests.conftest import make_org
from tests.helpers import free_port


def _settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


def test_a_fresh_offline_install_says_where_what_and_the_next_step(tmp_path):
    settings = _settings(db={"embedded_dir": tmp_path / "pg"})
    text = startup_text(
        settings,
        database_url=f"postgresql://postgres:@/postgres?host={tmp_path / 'pg'}",
        host="127.0.0.1",
        port=8000,
        organisations=0,
        vk=".venv/bin/vk",
    )
    assert text == (
        "Voice knowledge service on http://127.0.0.1:8000\n"
        "  console   http://127.0.0.1:8000/console (sign in with an admin key)\n"
        "  API docs  http://127.0.0.1:8000/schema\n"
        f"  database  embedded PostgreSQL in {tmp_path / 'pg'}, stopped with the service\n"
        "  embedder  all-MiniLM-L6-v2 (int8), offline\n"
        "  answerer  extractive, offline: reads out the best sentences of your documents\n"
        "            set OPENAI_API_KEY to embed and answer with OpenAI instead\n"
        "  ingestion a worker process beside the service, 2 documents at once, at lower CPU priority (nice 10)\n"
        "Next: create an organisation and its first admin key:\n"
        '  .venv/bin/vk create-org "Your organisation"\n'
        "Ctrl-C stops it. Logs follow on stderr, as JSON lines."
    )


def test_an_openai_deployment_shows_its_database_without_the_password():
    settings = _settings(
        DATABASE_URL="postgresql://vk:s3cret@db.internal:5432/vk",
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL="https://user:token@llm.internal/v1",
        query={"llm_model": "gpt-4.1-mini"},
    )
    text = startup_text(
        settings,
        database_url="postgresql://vk:s3cret@db.internal:5432/vk",
        host="0.0.0.0",
        port=9000,
        organisations=3,
    )
    assert text == (
        "Voice knowledge service on http://127.0.0.1:9000\n"
        "  console   http://127.0.0.1:9000/console (sign in with an admin key)\n"
        "  API docs  http://127.0.0.1:9000/schema\n"
        "  database  postgresql://vk@db.internal:5432/vk\n"
        "  embedder  OpenAI text-embedding-3-small at https://llm.internal/v1\n"
        "  answerer  OpenAI gpt-4.1-mini at https://llm.internal/v1\n"
        "  ingestion a worker process beside the service, 2 documents at once, at lower CPU priority (nice 10)\n"
        "Ctrl-C stops it. Logs follow on stderr, as JSON lines."
    )
    assert "s3cret" not in text
    assert "token" not in text


def test_no_next_step_when_the_organisations_could_not_be_counted(tmp_path):
    settings = _settings(db={"embedded_dir": tmp_path})
    text = startup_text(settings, database_url="postgresql://x@h/d", host="h", port=1, organisations=None)
    assert "create-org" not in text
    assert text.endswith("  embedder  all-MiniLM-L6-v2 (int8), offline\n"
                         "  answerer  extractive, offline: reads out the best sentences of your documents\n"
                         "            set OPENAI_API_KEY to embed and answer with OpenAI instead\n"
                         "  ingestion a worker process beside the service, 2 documents at once, at lower CPU priority (nice 10)\n"
                         "Ctrl-C stops it. Logs follow on stderr, as JSON lines.")  # fmt: skip


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, "all-MiniLM-L6-v2 (int8), offline"),
        ({"embedding": {"minilm_precision": "fp32"}}, "all-MiniLM-L6-v2 (fp32), offline"),
        (
            {"embedding": {"provider": "lexical"}},
            "lexical: hashed words, offline (matches words, not meaning)",
        ),
        (
            {"embedding": {"provider": "local", "local_model": "BAAI/bge-small-en-v1.5"}},
            "BAAI/bge-small-en-v1.5 (sentence-transformers), offline",
        ),
        ({"OPENAI_API_KEY": "sk-test"}, "OpenAI text-embedding-3-small"),
        (
            {
                "OPENAI_API_KEY": "sk-test",
                "embedding": {"openai_model": "text-embedding-3-large", "openai_dimensions": 1024},
            },
            "OpenAI text-embedding-3-large, 1024 dimensions",
        ),
        # A key chooses the answerer; the embedder stays the one asked for.
        (
            {"OPENAI_API_KEY": "sk-test", "embedding": {"provider": "minilm"}},
            "all-MiniLM-L6-v2 (int8), offline",
        ),
    ],
)
def test_the_embedder_in_use(values, expected):
    assert embedder_text(_settings(**values)) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, "extractive, offline: reads out the best sentences of your documents"),
        ({"OPENAI_API_KEY": "sk-test"}, "OpenAI gpt-4o-mini"),
        (
            {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"},
            "OpenAI gpt-4o-mini at http://127.0.0.1:11434/v1",
        ),
    ],
)
def test_the_answerer_in_use(values, expected):
    assert answerer_text(_settings(**values)) == expected


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("127.0.0.1", 8000, "http://127.0.0.1:8000"),
        ("0.0.0.0", 8765, "http://127.0.0.1:8765"),
        ("::", 8000, "http://[::1]:8000"),
        ("::1", 8000, "http://[::1]:8000"),
        ("knowledge.internal", 80, "http://knowledge.internal:80"),
    ],
)
def test_the_url_to_open(host, port, expected):
    assert service_url(host, port) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://vk:secret@db.internal:5432/vk", "postgresql://vk@db.internal:5432/vk"),
        ("postgres://vk:secret@db/vk", "postgres://vk@db/vk"),
        ("postgresql://vk@db/vk?password=secret&sslmode=require", "postgresql://vk@db/vk?sslmode=require"),
        ("postgresql://vk@db/vk", "postgresql://vk@db/vk"),
        ("not a url", "DATABASE_URL (not shown: it could not be parsed)"),
    ],
)
def test_database_urls_are_shown_without_their_password(url, expected):
    assert without_password(url) == expected


@pytest.mark.parametrize(
    ("argv0", "expected"),
    [
        ("{repo}/.venv/bin/vk", ".venv/bin/vk"),  # `uv run vk serve`, `.venv/bin/vk serve`
        ("/usr/local/bin/vk", "vk"),  # installed elsewhere: on the PATH
        ("{repo}/app/cli.py", "vk"),  # `python -m app.cli serve`
    ],
)
def test_how_to_run_vk_from_here(tmp_path, argv0, expected):
    assert vk_command(argv0.format(repo=tmp_path), cwd=tmp_path) == expected


async def test_organisations_are_counted_in_the_database(database_url, settings, sessionmaker):
    assert await count_organisations_at(database_url, settings) == 0
    await make_org(sessionmaker, "Acme")
    await make_org(sessionmaker, "Globex")
    assert await count_organisations_at(database_url, settings) == 2


def test_an_unreachable_database_leaves_the_count_unknown(settings, caplog):
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    with caplog.at_level(logging.WARNING, logger="app.startup"):
        assert organisation_count(url, settings) is None
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["could not count the organisations"]


def test_the_readme_shows_the_start_up_text():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    sample = startup_text(
        _settings(db={"embedded_dir": Path("/home/you/voice-knowledge/.data/postgres")}),
        database_url="postgresql://postgres:@/postgres?host=/home/you/voice-knowledge/.data/postgres",
        host="127.0.0.1",
        port=8000,
        organisations=0,
        vk=".venv/bin/vk",
    )
    assert sample in readme


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, "a worker process beside the service, 2 documents at once, at lower CPU priority (nice 10)"),
        (
            {"ingestion": {"workers": 4, "nice": 5}},
            "a worker process beside the service, 4 documents at once, at lower CPU priority (nice 5)",
        ),
        ({"ingestion": {"isolation": "inline"}}, "in the service process, 2 documents at once"),
        (
            {"ingestion": {"workers": 0}},
            "none here (INGESTION__WORKERS=0): run `vk worker` to index documents",
        ),
    ],
)
def test_the_ingestion_line_says_where_documents_are_indexed(values, expected):
    assert ingestion_text(_settings(**values)) == expected
