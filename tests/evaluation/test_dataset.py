"""Hostile and malformed question sets (app/evaluation/dataset.py): each is refused with a
DatasetError that names the file, the line or the document at fault, never a traceback and
never a value read as another type."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.evaluation.dataset import DatasetError, load_documents, load_questions

SQUAD = {
    "id": "q1",
    "question": "When do you open?",
    "answers": ["9 am"],
    "doc": "Hours.md",
    "paragraph_index": 0,
}
CALLERS = {
    "id": "c1",
    "org": "acme",
    "question": "When do you open?",
    "answers": ["9 am"],
    "doc": "acme/Hours.md",
    "gold_sentence": "We open at 9 am.",
    "kind": "direct",
}


def _file(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_bytes(data)
    return path


def _error(path: Path) -> str:
    with pytest.raises(DatasetError) as caught:
        load_questions(path)
    return str(caught.value)


def test_a_byte_order_mark_on_the_first_line_is_read_past(tmp_path):
    path = _file(tmp_path, b"\xef\xbb\xbf" + json.dumps(SQUAD).encode() + b"\r\n")
    assert [q.id for q in load_questions(path)] == ["q1"]


def test_bytes_that_are_not_utf8_name_the_line(tmp_path):
    line = json.dumps(SQUAD).encode().replace(b"open", b"op\xe9n")
    path = _file(tmp_path, json.dumps(SQUAD).encode() + b"\n" + line + b"\n")
    assert _error(path) == f"{path}:2: not UTF-8 text (byte 41)"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"[" * 100_000, "nested too deep"),
        (
            json.dumps({**SQUAD, "paragraph_index": 0}).replace("0}", "1e400}").encode(),
            "paragraph_index must",
        ),
        (b"[1, 2]", "a JSON object was expected, not list"),
        (b"12", "a JSON object was expected, not int"),
    ],
    ids=["deep", "huge-number", "array", "number"],
)
def test_json_no_record_could_be_made_of_names_the_line(tmp_path, line, reason):
    path = _file(tmp_path, line + b"\n")
    message = _error(path)
    assert message.startswith(f"{path}:1: not a question record (")
    assert reason in message


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({**SQUAD, "answers": "9 am"}, "answers must be a list of strings"),
        ({**SQUAD, "answers": {"9 am": 1}}, "answers must be a list of strings"),
        ({**SQUAD, "answers": [9]}, "answers must be a list of strings"),
        ({**SQUAD, "question": 12345}, "question must be a string, not int"),
        ({**SQUAD, "paragraph_index": True}, "paragraph_index must be a whole number"),
        ({**SQUAD, "paragraph_index": 0.9}, "paragraph_index must be a whole number"),
        ({**SQUAD, "id": None}, "id must be a string, not missing"),
        ({**SQUAD, "doc": ["Hours.md"]}, "doc must be a string, not list"),
        ({**CALLERS, "gold_sentence": 5}, "gold_sentence must be a string, not int"),
        ({**CALLERS, "kind": {"a": 1}}, "kind must be a string, not dict"),
        ({**CALLERS, "org": None}, "org must be a string, not missing"),
        ({**CALLERS, "org": "..", "doc": "../Hours.md"}, "org '..' is not a folder name"),
        ({**SQUAD, "question": "   "}, "question: must not be empty or only whitespace"),
        ({**SQUAD, "question": "x" * 2001}, "question: string should have at most 2000 characters"),
    ],
)
def test_a_field_of_the_wrong_type_is_refused_not_converted(tmp_path, record, reason):
    path = _file(tmp_path, json.dumps(record).encode() + b"\n")
    message = _error(path)
    assert message.startswith(f"{path}:1: not a question record (")
    assert reason in message


def test_a_whole_number_id_is_read_as_its_text(tmp_path):
    path = _file(tmp_path, json.dumps({**SQUAD, "id": 7}).encode() + b"\n")
    assert [q.id for q in load_questions(path)] == ["7"]


def test_a_pipe_is_not_a_question_file(tmp_path):
    path = tmp_path / "questions.jsonl"
    os.mkfifo(path)
    assert _error(path) == f"{path}: not a file"


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "Hours.md").write_text("# Hours\n\nWe open at 9 am.\n", encoding="utf-8")
    return docs


def _load_error(docs: Path) -> str:
    with pytest.raises(DatasetError) as caught:
        load_documents(docs, load_questions(_file(docs.parent, json.dumps(SQUAD).encode())))
    return str(caught.value)


def test_a_document_that_is_not_utf8_is_named(tmp_path):
    docs = _docs(tmp_path)
    (docs / "Bad.md").write_bytes(b"# Bad\n\nCaf\xe9\n")
    assert _load_error(docs) == "Bad.md: not UTF-8 text (byte 11)"


def test_a_link_out_of_the_documents_folder_is_refused(tmp_path):
    docs = _docs(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2", encoding="utf-8")
    (docs / "Notes.md").symlink_to(secret)
    assert _load_error(docs) == f"Notes.md: a link to a file outside {docs}"


def test_a_link_inside_the_documents_folder_is_read(tmp_path):
    docs = _docs(tmp_path)
    (docs / "Opening.md").symlink_to(docs / "Hours.md")
    documents = load_documents(docs, load_questions(_file(tmp_path, json.dumps(SQUAD).encode())))
    assert documents["Opening.md"].paragraphs == ("We open at 9 am.",)


def test_a_pipe_among_the_documents_is_refused_not_waited_on(tmp_path):
    docs = _docs(tmp_path)
    os.mkfifo(docs / "Pipe.md")
    assert _load_error(docs) == "Pipe.md: not a regular file"


def test_a_dangling_link_among_the_documents_is_named(tmp_path):
    docs = _docs(tmp_path)
    (docs / "Gone.md").symlink_to(tmp_path / "nowhere.md")
    assert _load_error(docs) == "Gone.md: a link to nothing"
