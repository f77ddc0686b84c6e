"""The evaluation end to end on a tiny question set, in-process against the test database:
documents uploaded through the API, ingestion drained by the test, questions asked through
the real query endpoint."""

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import typer
from litestar.testing.transport import TestClientTransport as LitestarTransport
from sqlalchemy import text as sql
from typer.testing import CliRunner

from app.cli import cli
from app.evaluation import commands
from app.evaluation.commands import (
    Evaluation,
    EvaluationInterrupted,
    _warn_of_errors,
    build_report,
    evaluate,
    replay_with,
)
from app.evaluation.dataset import as_plain_text, load_documents, load_questions
from app.evaluation.inprocess import _ThreadedTransport
from app.evaluation.report import write_report
from app.evaluation.runner import Knowledge, Row, find_knowledge, load_knowledge
from app.evaluation.service_client import ServiceClient, ServiceError
from tests.conftest import REPO
from tests.helpers import free_port

PROMPTS = Path(__file__).resolve().parents[2] / "prompts"

DOCS = {
    "Acme_Dental.md": (
        "# Acme Dental\n\n"
        "The practice is open Monday to Friday from 9 am to 5 pm. On Saturdays we open from 10 am to 1 pm.\n\n"
        "Free parking is available behind the building, entrance on Elm Street.\n"
    ),
    "Payments.md": (
        "# Payments\n\n"
        "We accept cash, debit cards and credit cards. Payment is due at the end of each visit.\n\n"
        "Members pay 90% of the list price for a cleaning.\n"
    ),
    "Emergencies.md": (
        "# Emergencies\n\nFor a dental emergency outside opening hours, call the emergency line and press 2.\n"
    ),
}
QUESTIONS = [
    {
        "id": "hours",
        "question": "When do you open on Saturdays?",
        "answers": ["10 am to 1 pm"],
        "doc": "Acme_Dental.md",
        "paragraph_index": 0,
    },
    {
        "id": "parking",
        "question": "Where can I park my car?",
        "answers": ["behind the building"],
        "doc": "Acme_Dental.md",
        "paragraph_index": 1,
    },
    {
        "id": "members",
        "question": "How much of the list price do members pay for a cleaning?",
        "answers": ["90%"],
        "doc": "Payments.md",
        "paragraph_index": 1,
    },
    {
        "id": "emergency",
        "question": "Which key do I press on the emergency line?",
        "answers": ["press 2"],
        "doc": "Emergencies.md",
        "paragraph_index": 0,
    },
    {
        "id": "mona",
        "question": "Who painted the Mona Lisa?",
        "answers": [],
        "doc": "Acme_Dental.md",
        "paragraph_index": 0,
    },
    {
        "id": "non-members",
        "question": "What do non-members pay for a cleaning?",
        "answers": [],
        "doc": "Payments.md",
        "paragraph_index": 1,
    },
]


def write_dataset(folder: Path, questions=QUESTIONS) -> Path:
    docs = folder / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    path = folder / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    return path


def load(folder: Path, questions=QUESTIONS):
    path = write_dataset(folder, questions)
    picked = load_questions(path)
    return picked, load_documents(path.parent / "docs", picked)


async def run_tiny(client, org, drain_queue, tmp_path, **kwargs):
    questions, documents = load(tmp_path)
    service = ServiceClient(client, org.admin_key)
    return await evaluate(service, questions, documents, wait=drain_queue, **kwargs)


async def test_tiny_set_replies(client, org, drain_queue, tmp_path):
    evaluation = await run_tiny(client, org, drain_queue, tmp_path)
    outcomes = [(r.id, r.status, r.correct, r.gold_rank) for r in evaluation.rows[0]]
    assert outcomes == [
        ("hours", "answered", True, 1),
        ("parking", "not_found", False, 1),  # found, but the extractive answerer's support is too low
        ("members", "answered", True, 1),
        ("emergency", "answered", True, 1),
        ("mona", "not_found", None, None),
        ("non-members", "answered", None, None),  # the members' price, read out anyway
    ]


async def test_documents_can_be_uploaded_as_plain_text(client, org, drain_queue, tmp_path, engine):
    # As a pasted text file: heading marks and bold dropped, named .txt, read as text.
    questions, documents = load(tmp_path)
    plain = {name: as_plain_text(document) for name, document in documents.items()}
    assert plain["Payments.md"].data.decode() == DOCS["Payments.md"].replace("# Payments", "Payments")
    assert plain["Payments.md"].paragraphs == documents["Payments.md"].paragraphs  # the same gold
    evaluation = await evaluate(ServiceClient(client, org.admin_key), questions, plain, wait=drain_queue)
    assert [r.id for r in evaluation.rows[0] if r.correct] == ["hours", "members", "emergency"]
    async with engine.connect() as conn:
        stored = (
            await conn.execute(sql("SELECT title, file_name, source_kind FROM documents ORDER BY title"))
        ).all()
    assert [tuple(row) for row in stored] == [
        ("Acme Dental", "Acme_Dental.txt", "text"),
        ("Emergencies", "Emergencies.txt", "text"),
        ("Payments", "Payments.txt", "text"),
    ]


class _CancelsAtQuery(ServiceClient):
    """Cancels the run at its nth question, as asyncio.run does on Ctrl-C."""

    def __init__(self, *args, task: asyncio.Task, at: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.task, self.at, self.asked = task, at, 0

    async def query(self, *args, **kwargs):
        self.asked += 1
        if self.asked == self.at:
            self.task.cancel()
            # Lands here, between two questions: no request is left running in a thread
            # when the test ends.
            await asyncio.sleep(0)
        return await super().query(*args, **kwargs)


@pytest.mark.parametrize("variants", [[None], ["default", "concise"]], ids=["one-variant", "compare"])
async def test_an_interrupted_run_keeps_what_was_answered(client, org, drain_queue, tmp_path, variants):
    questions, documents = load(tmp_path)

    async def run(http):
        service = _CancelsAtQuery(http, org.admin_key, task=asyncio.current_task(), at=4)
        return await evaluate(service, questions, documents, wait=drain_queue, variants=variants)

    # Requests sent from threads, as vk eval sends them: the test client's own transport
    # answers without ever giving the event loop a turn, so nothing could cancel it.
    transport = _ThreadedTransport(LitestarTransport(client))
    async with httpx.AsyncClient(transport=transport, base_url=client.base_url) as http:
        with pytest.raises(EvaluationInterrupted) as caught:
            await asyncio.create_task(run(http))
    kept = caught.value.evaluation.rows
    # Cancelled before the 4th call: one variant has 3 questions answered, two variants 1
    # question (each question is asked once per variant; the 2nd one's second call never went).
    expected = ["hours", "parking", "members"] if len(variants) == 1 else ["hours"]
    assert [[r.id for r in rows] for rows in kept] == [expected] * len(variants)
    document, _ = build_report({"interrupted_after": len(expected)}, caught.value.evaluation)
    assert document["kind"] == ("eval" if len(variants) == 1 else "compare")


def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path):
    # A CI job's timeout sends SIGTERM: the run died at once, with no report and its
    # PostgreSQL left running. In a process of its own, since the signal is real.
    path = write_dataset(tmp_path)
    script = f"""
import asyncio, os, signal, sys
from app.cli import cli
from app.evaluation import commands
from app.evaluation.runner import Knowledge, Row

async def running(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        row = Row(id="hours", question="When?", answers=["9 am"], doc="Acme_Dental.md", paragraph_index=0,
                  answerable=True, variant=None, http_status=200, status="answered", answer="At 9 am.")
        knowledge = Knowledge(agents={{"": "{AGENT}"}}, documents={{}}, missing=())
        raise commands.EvaluationInterrupted(commands.Evaluation(knowledge, [None], [[row]])) from None

commands._remote = running
sys.argv = ["vk", "eval", {str(path)!r}, "--url", "http://127.0.0.1:9", "--key", "vk_x",
            "--agent", "{AGENT}", "--out", {str(tmp_path / "out")!r}]
cli()
"""
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.endswith("interrupted: the report covers the 1 of 6 questions answered before it\n")
    document = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [r["id"] for r in document["rows"]] == ["hours"]


def test_cli_writes_the_partial_report_of_an_interrupted_run(tmp_path, monkeypatch):
    rows = [
        Row(
            id="hours",
            question="When?",
            answers=["9 am"],
            doc="Acme_Dental.md",
            paragraph_index=0,
            answerable=True,
            variant=None,
            http_status=200,
            status="answered",
            answer="We open at 9 am.",
        )
    ]
    partial = Evaluation(Knowledge(agents={"": AGENT}, documents={}, missing=()), [None], [rows])

    async def interrupted(*args, **kwargs):
        raise EvaluationInterrupted(partial)

    monkeypatch.setattr(commands, "_remote", interrupted)
    path = write_dataset(tmp_path)
    url = ["--url", "http://127.0.0.1:9", "--key", "vk_x", "--agent", AGENT]
    result = CliRunner().invoke(cli, ["eval", str(path), *url, "--out", str(tmp_path / "out")])
    assert result.exit_code == 130
    assert result.stderr.endswith("interrupted: the report covers the 1 of 6 questions answered before it\n")
    document = json.loads((tmp_path / "out" / "report.json").read_text())
    assert (document["config"]["interrupted_after"], [r["id"] for r in document["rows"]]) == (1, ["hours"])


async def test_tiny_set_metrics(client, org, drain_queue, tmp_path):
    evaluation = await run_tiny(client, org, drain_queue, tmp_path)
    document, _ = build_report({}, evaluation)
    metrics = document["metrics"]
    assert (metrics["retrieval"], metrics["answers"], metrics["not_found"]) == (
        {"hit@1": 1.0, "hit@3": 1.0, "hit@5": 1.0, "mrr@10": 1.0, "candidates_returned_max": 3, "reused": 0},
        # F1: (0.6667 + 0 + 0.2 + 0.2857) / 4; the spoken answers are whole sentences.
        {
            "contains_gold": 0.75,
            "token_f1": 0.2881,
            "answered_share": 0.6667,
            # Answered: hours, members and emergency rightly; non-members (unanswerable) wrongly.
            "answered_right": 3,
            "answered_wrong": 1,
            "speakable_share": 1.0,
            "degraded": 0,
        },
        {"precision": 0.5, "recall": 0.5, "true_positives": 1, "false_positives": 1, "false_negatives": 1},
    )


async def test_spoken_percentage_counts_as_the_gold_answer(client, org, drain_queue, tmp_path):
    evaluation = await run_tiny(client, org, drain_queue, tmp_path)
    members = next(r for r in evaluation.rows[0] if r.id == "members")
    assert (members.answer, members.correct) == (
        "Members pay 90 percent of the list price for a cleaning.",
        True,
    )


async def test_reports_are_written(client, org, drain_queue, tmp_path):
    evaluation = await run_tiny(client, org, drain_queue, tmp_path)
    json_path, md_path = write_report(tmp_path / "out", *build_report({"mode": "test"}, evaluation))
    document = json.loads(json_path.read_text())
    markdown = md_path.read_text()
    headings = [line for line in markdown.splitlines() if line.startswith("#")]
    assert (document["kind"], len(document["rows"]), headings) == (
        "eval",
        6,
        [
            "# Evaluation report",
            "## Reliability of the confidence",
            "## Worst cases",
            "### Wrong answers (0)",
            "### Missed not_founds (1)",
            "### False not_founds (1)",
        ],
    )


async def test_compare_reports_both_variants_side_by_side(client, org, drain_queue, tmp_path):
    evaluation = await run_tiny(client, org, drain_queue, tmp_path, variants=["default", "concise"])
    document, markdown = build_report({}, evaluation)
    # Offline the extractive answerer never reads the grounding prompt: nothing changes.
    assert (
        list(document["metrics"]),
        document["changed"],
        "| metric | A: default | B: concise | B - A |" in markdown,
        markdown.index("## Outcome changed (0 of 6)") < markdown.index("## Metrics side by side"),
    ) == (["default", "concise"], [], True, True)


async def test_remote_mode_finds_the_documents_of_an_existing_agent(client, org, drain_queue, tmp_path):
    _, documents = load(tmp_path)
    service = ServiceClient(client, org.admin_key)
    loaded = await load_knowledge(service, documents, wait=drain_queue)
    found = await find_knowledge(service, loaded.agent_id, documents)
    assert (found.documents, found.missing) == (loaded.documents, ())


async def test_replay_reruns_logged_questions_with_a_variant(client, org, drain_queue, tmp_path):
    _, documents = load(tmp_path)
    service = ServiceClient(client, org.admin_key)
    agent = (await load_knowledge(service, documents, wait=drain_queue)).agent_id
    for question in (
        "When do you open on Saturdays?",
        "Who painted the Mona Lisa?",
        "when do you open on saturdays",
    ):
        r = await client.post(
            f"/api/agents/{agent}/query_knowledge", json={"query": question}, headers=org.headers
        )
        assert r.status_code == 200
    gaps = (await client.get("/api/knowledge-gaps", headers=org.headers)).json()
    assert [(g["question"], g["count"]) for g in gaps] == [("Who painted the Mona Lisa?", 1)]
    # Replayed twice: the second replay reads the callers' calls only, not the first replay's.
    for _ in range(2):
        document, _ = await replay_with(service, agent, last=10, variant="concise")
        # Newest first, one row per distinct question: the repeated one is replayed once.
        rows = [(r["query"], r["logged_status"], r["status"], r["changed_answer"]) for r in document["rows"]]
        assert (document["metrics"]["logged_calls_read"], rows) == (
            3,
            [
                ("when do you open on saturdays", "answered", "answered", False),
                ("Who painted the Mona Lisa?", "not_found", "not_found", False),
            ],
        )
    # The replays are logged, as evaluation traffic, and the gaps count the caller's call alone.
    log = (await client.get(f"/api/agents/{agent}/queries", headers=org.headers)).json()
    assert sorted(q["evaluation"] for q in log["items"]) == [False] * 3 + [True] * 4
    assert (await client.get("/api/knowledge-gaps", headers=org.headers)).json() == gaps


async def test_an_evaluation_leaves_no_knowledge_gaps(client, org, drain_queue, tmp_path):
    evaluation = await run_tiny(client, org, drain_queue, tmp_path)
    # Without the mark, these two would be gaps.
    assert [(r.id, r.status) for r in evaluation.rows[0] if r.status != "answered"] == [
        ("parking", "not_found"),
        ("mona", "not_found"),
    ]
    assert (await client.get("/api/knowledge-gaps", headers=org.headers)).json() == []


def test_cli_remote_mode_needs_url_key_and_agent(tmp_path):
    path = write_dataset(tmp_path)
    result = CliRunner().invoke(cli, ["eval", str(path), "--url", "http://127.0.0.1:9"])
    assert (result.exit_code, "--url, --key and --agent go together" in result.output) == (2, True)


def test_cli_replay_needs_a_running_service():
    result = CliRunner().invoke(cli, ["replay", "--agent", AGENT, "--variant", "concise"])
    assert (result.exit_code, "--url" in result.output) == (2, True)


def test_cli_names_the_url_it_cannot_reach(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    expected = (
        f"error: cannot reach the service at {url} (All connection attempts failed); check that it is "
        "running (vk serve) and that --url has the right scheme, host and port\n"
    )
    path = write_dataset(tmp_path)
    for args in (
        ["replay", "--url", url, "--key", "vk_x", "--agent", AGENT, "--variant", "concise"],
        ["eval", str(path), "--url", url, "--key", "vk_x", "--agent", AGENT],
    ):
        result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "out")])
        assert (args[0], result.exit_code, result.stderr) == (args[0], 1, expected)


AGENT = "0b5e3c52-8f4e-4d55-9a43-0a3f5d0c6a11"


def test_cli_refuses_an_agent_id_that_is_no_uuid(tmp_path):
    path = write_dataset(tmp_path)
    url = ["--url", "http://127.0.0.1:9", "--key", "vk_x"]
    for args in (["replay", *url, "--variant", "concise"], ["eval", str(path), *url]):
        result = CliRunner().invoke(cli, [*args, "--agent", "../knowledge"])
        assert (args[0], result.exit_code, "Invalid value for '--agent'" in result.output) == (
            args[0],
            2,
            True,
        )


def test_cli_refuses_a_report_folder_it_cannot_write_before_asking(tmp_path):
    path = write_dataset(tmp_path)
    (tmp_path / "afile").write_text("x")
    url = ["--url", f"http://127.0.0.1:{free_port()}", "--key", "vk_x", "--agent", AGENT]
    for args in (["eval", str(path), *url], ["replay", *url, "--variant", "concise"]):
        result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "afile")])
        # Refused before any request: an unreachable service would otherwise exit 1.
        assert (
            args[0],
            result.exit_code,
            f"cannot write the report into {tmp_path / 'afile'}" in result.output,
        ) == (
            args[0],
            2,
            True,
        )


def test_cli_refuses_a_report_folder_inside_the_documents(tmp_path):
    path = write_dataset(tmp_path)
    result = CliRunner().invoke(cli, ["eval", str(path), "--out", str(tmp_path / "docs" / "out")])
    assert (result.exit_code, "inside the documents folder" in result.output) == (2, True)
    assert not (tmp_path / "docs" / "out").exists()


def test_cli_refuses_to_compare_a_variant_with_itself(tmp_path):
    path = write_dataset(tmp_path)
    result = CliRunner().invoke(cli, ["eval", str(path), "--compare", "concise", "concise"])
    assert (
        result.exit_code,
        "--compare needs two different variants, not 'concise' twice" in result.output,
    ) == (
        2,
        True,
    )


def test_cli_stops_at_a_broken_prompt_file_with_its_message(tmp_path):
    path = write_dataset(tmp_path)
    prompts = Path(shutil.copytree(PROMPTS, tmp_path / "prompts"))
    broken = prompts / "default" / "reply.not_found.md"
    broken.write_text("no front matter\n", encoding="utf-8")
    expected = f"error: {broken}: no front matter: the file must start with a '+++' line\n"
    result = CliRunner().invoke(
        cli, ["eval", str(path), "--out", str(tmp_path / "out")], env={"PROMPTS_DIR": str(prompts)}
    )
    assert (result.exit_code, result.stderr) == (1, expected)


def test_a_report_is_replaced_whole(tmp_path):
    out = tmp_path / "out"
    write_report(out, {"kind": "eval", "n": 1}, "# first\n")
    json_path, md_path = write_report(out, {"kind": "eval", "n": 2}, "# second\n")
    assert (json.loads(json_path.read_text()), md_path.read_text()) == (
        {"kind": "eval", "n": 2},
        "# second\n",
    )
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.md"]


def test_failed_requests_are_said_and_end_with_status_1(capsys):
    document = {
        "kind": "compare",
        "metrics": {"A": {"http_errors": 0}, "B": {"http_errors": 2}},
        "rows": [
            {"id": "q1", "A": {"error": None}, "B": {"error": "HTTP 422: question too long"}},
            {"id": "q2", "A": {"error": None}, "B": {"error": "HTTP 500"}},
        ],
    }
    with pytest.raises(typer.Exit) as caught:
        _warn_of_errors(document, 4)
    assert caught.value.exit_code == 1
    assert capsys.readouterr().err == (
        "error: 2 of 4 requests failed (first: HTTP 422: question too long); the figures count them as wrong\n"
    )
    _warn_of_errors({"kind": "eval", "metrics": {"http_errors": 0}, "rows": [{"error": None}]}, 1)


def test_cli_rejects_an_empty_sample(tmp_path):
    path = write_dataset(tmp_path)
    result = CliRunner().invoke(cli, ["eval", str(path), "--limit", "0"])
    assert (result.exit_code, "--limit must be at least 1" in result.output) == (2, True)


async def test_unknown_variant_stops_the_run(client, org, drain_queue, tmp_path):
    with pytest.raises(ServiceError, match="the service refused the variant: unknown prompt variant 'nope'"):
        await run_tiny(client, org, drain_queue, tmp_path, variants=["nope"])


async def test_words_of_the_passage_read_out_are_not_source_talk(client, org, drain_queue, tmp_path):
    # A tax office's own word "documents", read out by the extractive answerer, is no sign of an
    # answer that talks about its sources: the report counts the answer speakable.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "Drop_off.md").write_text(
        "# Drop-off\n\nLeave your documents at the front desk and a preparer will phone you.\n",
        encoding="utf-8",
    )
    question = {
        "id": "drop-off",
        "question": "Where do I leave my documents?",
        "answers": ["front desk"],
        "doc": "Drop_off.md",
        "paragraph_index": 0,
    }
    path = tmp_path / "questions.jsonl"
    path.write_text(json.dumps(question) + "\n", encoding="utf-8")
    questions = load_questions(path)
    service = ServiceClient(client, org.admin_key)
    evaluation = await evaluate(service, questions, load_documents(docs, questions), wait=drain_queue)
    row = evaluation.rows[0][0]
    assert (row.status, row.answer, row.speech_problems) == (
        "answered",
        "Leave your documents at the front desk and a preparer will phone you.",
        [],
    )


def test_a_report_names_the_prompt_text_it_measured(tmp_path):
    from app.config import PROJECT_ROOT
    from app.prompting import PromptLibrary

    folder = Path(shutil.copytree(PROJECT_ROOT / "prompts", tmp_path / "prompts"))
    before = commands.prompts_config(PromptLibrary.load(folder), folder)
    assert list(before["versions"]) == ["default", "concise"]
    assert before["versions"]["default"] == PromptLibrary.load(folder).get().version
    system = folder / "default" / "grounding.system.md"
    system.write_text(system.read_text() + "\nBe brief.\n")
    after = commands.prompts_config(PromptLibrary.load(folder), folder)
    # Same versions, another text: the fingerprint tells the two runs apart.
    assert (after["versions"], after["fingerprint"] != before["fingerprint"]) == (before["versions"], True)
