"""The callers-dev format: loading (one knowledge base per organisation, gold paragraph found
by its sentence), whole-token grading of every gold answer, and the by-kind and reliability
figures of the report. The fixture set lives in ``fixtures/callers``."""

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.evaluation.commands import build_report, evaluate
from app.evaluation.dataset import (
    DatasetError,
    Question,
    group_documents,
    load_documents,
    load_question_set,
    load_questions,
    locate_gold_paragraphs,
    parse_document,
)
from app.evaluation.metrics import GoldPassage, answer_tokens, contains_all_gold, reliability
from app.evaluation.report import kind_table, reliability_table, row_record, summarise
from app.evaluation.runner import Row, grade
from app.evaluation.service_client import QueryReply, ServiceClient

FIXTURE = Path(__file__).parent / "fixtures" / "callers"


def load_fixture() -> tuple[list[Question], dict]:
    return load_question_set(FIXTURE / "questions.jsonl")


# --- loading ---------------------------------------------------------------------------


def test_callers_records_are_read_with_their_organisation_and_kind():
    questions = load_questions(FIXTURE / "questions.jsonl")
    assert [(q.id, q.org, q.kind, q.doc, q.paragraph_index, q.needs_all_answers) for q in questions] == [
        ("bd-001", "bright-dental", "direct", "bright-dental/Patient FAQ.md", None, True),
        ("bd-002", "bright-dental", "paraphrase", "bright-dental/Patient FAQ.md", None, True),
        ("bd-003", "bright-dental", "number", "bright-dental/Price List.md", None, True),
        ("bd-004", "bright-dental", "unanswerable_related", None, None, True),
        ("lp-001", "luna-pizza", "multi_fact", "luna-pizza/Delivery FAQ.md", None, True),
        ("lp-002", "luna-pizza", "unanswerable_offtopic", None, None, True),
    ]


def test_squad_records_keep_their_shape_and_any_answer_rule(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"id": "s1", "question": "Q?", "answers": ["a", "b"], "doc": "X.md", "paragraph_index": 2}\n'
    )
    assert load_questions(path) == [Question("s1", "Q?", ("a", "b"), "X.md", 2)]
    assert load_questions(path)[0].needs_all_answers is False


def test_documents_are_named_by_organisation_and_grouped_per_knowledge_base():
    _, documents = load_fixture()
    groups = group_documents(documents)
    assert {org: list(group) for org, group in groups.items()} == {
        "bright-dental": ["bright-dental/Patient FAQ.md", "bright-dental/Price List.md"],
        "luna-pizza": ["luna-pizza/Delivery FAQ.md"],
    }


def test_a_flat_folder_is_one_group():
    documents = {name: parse_document(name, b"# T\n\nText.") for name in ("A.md", "B.md")}
    assert {org: list(group) for org, group in group_documents(documents).items()} == {"": ["A.md", "B.md"]}


def test_gold_paragraph_is_the_blank_line_block_holding_the_gold_sentence():
    questions, documents = load_fixture()
    located = {q.id: q.paragraph_index for q in questions}
    # Patient FAQ: 0 intro, 1 "## What are your opening hours?" + its answer, 2 parking.
    # Price List: 0 intro, 1 the table. Delivery FAQ: 0 delivery, 1 gluten-free.
    assert located == {"bd-001": 1, "bd-002": 2, "bd-003": 1, "bd-004": None, "lp-001": 0, "lp-002": None}
    assert documents["bright-dental/Patient FAQ.md"].paragraphs[2] == (
        "## Where can I park?\nFree parking is in the lot behind the building, entrance on Elm Street."
    )


def test_gold_sentence_missing_from_its_document_is_an_error(tmp_path):
    shutil.copytree(FIXTURE / "docs", tmp_path / "docs")
    path = tmp_path / "questions.jsonl"
    path.write_text(
        '{"id": "x", "org": "luna-pizza", "question": "Q?", "answers": ["£9"], '
        '"doc": "luna-pizza/Delivery FAQ.md", "gold_sentence": "Pizzas cost £9.", "kind": "number"}\n'
    )
    questions = load_questions(path)
    documents = load_documents(tmp_path / "docs", questions)
    with pytest.raises(
        DatasetError, match=r"question x: gold_sentence is not in luna-pizza/Delivery FAQ\.md"
    ):
        locate_gold_paragraphs(questions, documents)


def test_document_outside_its_organisation_is_an_error(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text(
        '{"id": "x", "org": "luna-pizza", "question": "Q?", "answers": ["a"], '
        '"doc": "bright-dental/Price List.md", "gold_sentence": "a", "kind": "direct"}\n'
    )
    with pytest.raises(DatasetError, match="is not under its organisation 'luna-pizza'"):
        load_questions(path)


def test_organisation_without_documents_is_an_error(tmp_path):
    shutil.copytree(FIXTURE / "docs", tmp_path / "docs")
    path = tmp_path / "questions.jsonl"
    path.write_text(
        '{"id": "x", "org": "still-water", "question": "Q?", "answers": [], "doc": null, '
        '"gold_sentence": null, "kind": "unanswerable_offtopic"}\n'
    )
    questions = load_questions(path)
    with pytest.raises(DatasetError, match=r"question x: no documents in .*still-water"):
        load_documents(tmp_path / "docs", questions)


def test_mixed_formats_are_an_error(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text(
        '{"id": "s1", "question": "Q?", "answers": [], "doc": "X.md", "paragraph_index": 0}\n'
        '{"id": "c1", "org": "o", "question": "Q?", "answers": [], "doc": null, "kind": "unanswerable_related"}\n'
    )
    with pytest.raises(DatasetError, match=":2: callers-dev and squad-dev records are mixed"):
        load_questions(path)


# --- grading ---------------------------------------------------------------------------


def test_tokens_keep_numbers_and_symbols_whole():
    assert answer_tokens("It’s $1,350 at 7:30 AM, X-rays 2.50.") == [
        "it's",
        "$",
        "1,350",
        "at",
        "7:30",
        "am",
        ",",
        "x-rays",
        "2.50",
        ".",
    ]


@pytest.mark.parametrize(
    ("answer", "golds", "expected"),
    [
        ("The exam is $265.", ["$26"], False),  # "$26" is not inside "$265"
        ("The exam is $26.", ["$26"], True),
        ("A base is £2.50 extra.", ["£2"], False),  # nor "£2" inside "£2.50"
        ("The exam is 265 dollars.", ["$265"], True),  # the spoken form counts
        ("The exam is 26 dollars.", ["$265"], False),
        ("Parking is in the lot behind the building.", ["lot behind the building", "Elm Street"], False),
        ("The lot behind the building, on elm street.", ["lot behind the building", "Elm Street"], True),
        ("Give us at least 48 hours’ notice.", ["at least 48 hours' notice"], True),
        ("Anything at all.", [], False),
    ],
)
def test_contains_all_gold_needs_every_answer_on_whole_tokens(answer, golds, expected):
    assert contains_all_gold(answer, golds) is expected


def _reply(status: str, answer: str, confidence: float, candidates: list[dict]) -> QueryReply:
    body = {
        "status": status,
        "answer": answer,
        "confidence": confidence,
        "cached": False,
        "degraded": False,
        "timings_ms": {"total": 5.0},
        "debug": {"candidates": candidates},
    }
    return QueryReply(200, body, 6.0)


def _candidate(document_id: str, text: str) -> dict:
    return {"document_id": document_id, "title": "T", "chunk_id": "c", "score": 0.1, "text": text}


def test_grade_of_a_callers_question_needs_every_gold_answer():
    questions, _ = load_fixture()
    parking = next(q for q in questions if q.id == "bd-002")
    half = grade(parking, None, _reply("answered", "Park in the lot behind the building.", 0.95, []), None)
    whole = grade(
        parking, None, _reply("answered", "The lot behind the building on Elm Street.", 0.95, []), None
    )
    assert (half.correct, half.right, whole.correct, whole.right, whole.org, whole.kind) == (
        False,
        False,
        True,
        True,
        "bright-dental",
        "paraphrase",
    )


def test_grade_of_a_squad_question_takes_any_gold_answer_as_a_substring():
    question = Question("s1", "Q?", ("26", "twenty-six"), "X.md", 0)
    row = grade(question, None, _reply("answered", "It costs $265.", 0.9, []), None)
    # Its report.json row has no org or kind: squad-dev rows keep their shape.
    assert (row.correct, sorted(set(row_record(row)) & {"org", "kind"})) == (True, [])


def test_grade_keeps_the_features_the_confidence_came_from_for_bench_calibrate():
    question = Question("s1", "Q?", ("26",), "X.md", 0)
    reply = _reply("answered", "It is 26.", 0.71, [])
    reply.body["debug"]["confidence"] = {"match": 0.62, "margin": 0.1, "confidence": 0.71}
    row = grade(question, None, reply, None)
    bare = grade(question, None, _reply("answered", "It is 26.", 0.71, []), None)
    assert (row_record(row)["confidence_parts"], "confidence_parts" in row_record(bare)) == (
        {"match": 0.62, "margin": 0.1, "confidence": 0.71},
        False,
    )


def test_gold_passage_of_a_heading_paragraph_matches_the_chunk_without_the_heading():
    # What the runner builds for bd-001 from the paragraph as extraction renders it.
    gold = GoldPassage.build(
        "doc",
        "We are open Monday to Friday from 8:00 am to 5:00 pm. We are closed on weekends.",
        ["Monday to Friday from 8:00 am to 5:00 pm"],
        paragraph_tokens=20,
        chunk_tokens=500,
    )
    chunk = "We are open Monday to Friday from 8:00 am to 5:00 pm. We are closed on weekends."
    assert (gold.matches("doc", chunk), gold.matches("doc", "We are closed on weekends.")) == (True, False)


# --- by kind and reliability -----------------------------------------------------------


def _row(id_: str, kind: str, answerable: bool, status: str, confidence: float, **scores) -> Row:
    return Row(
        id=id_,
        question="q",
        answers=["a"] if answerable else [],
        doc="o/D.md" if answerable else None,
        paragraph_index=0 if answerable else None,
        answerable=answerable,
        variant=None,
        http_status=200,
        status=status,
        confidence=confidence,
        org="o",
        kind=kind,
        **scores,
    )


# An unanswerable kind first, to show answerable kinds are listed first all the same.
ROWS = [
    _row("u1", "unanswerable_related", False, "answered", 0.9),  # wrong, and at 0.9
    _row("d1", "direct", True, "answered", 0.95, correct=True, gold_rank=1),
    _row("d2", "direct", True, "answered", 0.92, correct=False, gold_rank=3),
    _row("p1", "paraphrase", True, "not_found", 0.3, correct=False, gold_rank=None),
    _row("p2", "paraphrase", True, "answered", 0.75, correct=True, gold_rank=6),
    _row("u2", "unanswerable_related", False, "not_found", 0.1),
    _row("o1", "unanswerable_offtopic", False, "not_found", 0.0),
]


def test_outcomes_by_kind():
    assert summarise(ROWS)["by_kind"] == {
        "direct": {
            "questions": 2,
            "hit@5": 1.0,
            "contains_gold": 0.5,
            "answerable_refused": 0.0,
            "unanswerable_not_found": None,
            "wrong_high_confidence": 1,
        },
        "paraphrase": {
            "questions": 2,
            "hit@5": 0.0,
            "contains_gold": 0.5,
            "answerable_refused": 0.5,
            "unanswerable_not_found": None,
            "wrong_high_confidence": 0,
        },
        "unanswerable_related": {
            "questions": 2,
            "hit@5": None,
            "contains_gold": None,
            "answerable_refused": None,
            "unanswerable_not_found": 0.5,
            "wrong_high_confidence": 1,
        },
        "unanswerable_offtopic": {
            "questions": 1,
            "hit@5": None,
            "contains_gold": None,
            "answerable_refused": None,
            "unanswerable_not_found": 1.0,
            "wrong_high_confidence": 0,
        },
    }


def test_refusals_and_high_confidence_headline():
    summary = summarise(ROWS)
    # Answered: d1 0.95 right, d2 0.92 wrong, p2 0.75 right, u1 0.9 wrong (unanswerable).
    assert (summary["refusals"], summary["high_confidence"]) == (
        {"answerable_not_found": 0.25, "unanswerable_not_found": 0.6667},
        {"threshold": 0.9, "answered": 3, "right": 1, "precision": 0.3333, "wrong": 2},
    )


def test_reliability_bins_of_the_answered_replies():
    assert summarise(ROWS)["reliability"] == [
        {"low": 0.0, "high": 0.5, "answered": 0, "right": 0, "share_right": None},
        {"low": 0.5, "high": 0.7, "answered": 0, "right": 0, "share_right": None},
        {"low": 0.7, "high": 0.8, "answered": 1, "right": 1, "share_right": 1.0},
        {"low": 0.8, "high": 0.9, "answered": 0, "right": 0, "share_right": None},
        {"low": 0.9, "high": 1.0, "answered": 3, "right": 1, "share_right": 0.3333},
    ]


def test_reliability_puts_each_confidence_in_one_bin():
    outcomes = [
        (-0.1, True),
        (0.5, True),
        (0.6999, False),
        (0.8999, True),
        (0.9, False),
        (1.0, True),
        (1.2, True),
    ]
    assert [(b.low, b.answered, b.right) for b in reliability(outcomes)] == [
        (0.0, 1, 1),
        (0.5, 2, 1),
        (0.7, 0, 0),
        (0.8, 1, 1),
        (0.9, 3, 2),
    ]


def test_kind_and_reliability_tables():
    summary = summarise(ROWS)
    assert kind_table(summary)[2:] == [
        "| direct | 2 | 1.000 | 0.500 | 0.000 | n/a | 1 |",
        "| paraphrase | 2 | 0.000 | 0.500 | 0.500 | n/a | 0 |",
        "| unanswerable_related | 2 | n/a | n/a | n/a | 0.500 | 1 |",
        "| unanswerable_offtopic | 1 | n/a | n/a | n/a | 1.000 | 0 |",
        "| all | 7 | 0.500 | 0.500 | 0.250 | 0.667 | 2 |",  # ranks 1, 3, none, 6
    ]
    assert reliability_table(summary)[2:] == [
        "| [0.0, 0.5) | 0 | 0 | n/a |",
        "| [0.5, 0.7) | 0 | 0 | n/a |",
        "| [0.7, 0.8) | 1 | 1 | 1.000 |",
        "| [0.8, 0.9) | 0 | 0 | n/a |",
        "| [0.9, 1.0] | 3 | 1 | 0.333 |",
    ]


def test_a_set_without_kinds_has_no_kind_table():
    rows = [
        Row("s", "q", ["a"], "X.md", 0, True, None, 200, status="answered", confidence=0.95, correct=True)
    ]
    assert (summarise(rows)["by_kind"], kind_table(summarise(rows))) == ({}, [])


# --- end to end ------------------------------------------------------------------------


async def test_each_organisation_gets_its_own_knowledge_base_and_agent(client, org, drain_queue):
    questions, documents = load_fixture()
    evaluation = await evaluate(ServiceClient(client, org.admin_key), questions, documents, wait=drain_queue)
    knowledge = evaluation.knowledge
    org_of = {ref.document_id: name.split("/")[0] for name, ref in knowledge.documents.items()}
    rows = evaluation.rows[0]
    # Every candidate of every question comes from its own organisation's documents, and
    # each gold paragraph (a heading's block, a table, a two-sentence block) is retrieved.
    assert (
        sorted(knowledge.agents),
        len(set(knowledge.agents.values())),
        [{org_of[c["document_id"]] for c in r.candidates} == {r.org} for r in rows],
        [r.gold_rank is not None for r in rows if r.answerable],
    ) == (["bright-dental", "luna-pizza"], 2, [True] * 6, [True] * 4)
    document, markdown = build_report({}, evaluation)
    assert (
        document["config"]["agents"] == knowledge.agents,
        "agent_id" in document["config"],
        [row["kind"] for row in document["rows"]],
        "## By question kind" in markdown,
        "## Reliability of the confidence" in markdown,
    ) == (
        True,
        False,
        ["direct", "paraphrase", "number", "unanswerable_related", "multi_fact", "unanswerable_offtopic"],
        True,
        True,
    )


def test_cli_refuses_remote_mode_for_a_callers_set():
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(FIXTURE / "questions.jsonl"),
            "--url",
            "http://127.0.0.1:9",
            "--key",
            "k",
            "--agent",
            "0b5e3c52-8f4e-4d55-9a43-0a3f5d0c6a11",
        ],
    )
    assert (result.exit_code, "one agent per organisation" in result.output) == (2, True)
