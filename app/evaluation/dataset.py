"""Question sets and their documents, in two formats.

One question per line of a JSONL file. The squad-dev format (``../shared/eval/squad-dev``)::

    {"id": "...", "question": "...", "answers": ["..."], "doc": "Oxygen.md", "paragraph_index": 3}

One folder of documents serves every question. The callers-dev format
(``../shared/eval/callers-dev``) is recognised by its ``org`` field::

    {"id": "...", "org": "harborview-dental", "question": "...", "answers": ["...", "..."],
     "doc": "harborview-dental/Patient FAQ.md", "gold_sentence": "...", "kind": "paraphrase"}

Each organisation's documents live in ``docs/<org>/`` and form its own knowledge base; the
gold paragraph is the one of ``doc`` that holds ``gold_sentence``, and a reply is right
only when it conveys every gold answer (see ``Question.needs_all_answers``).

``answers == []`` marks a question the documents cannot answer (callers-dev then has no
``doc``). Documents are markdown files: a ``# Title`` line, then paragraphs separated by
blank lines; ``paragraph_index`` counts those paragraphs from 0, after the title line.
Documents are named by their path under the documents folder ("Oxygen.md",
"harborview-dental/Patient FAQ.md").
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from app.query.schemas import Question as QueryText

__all__ = [
    "DatasetError",
    "Document",
    "Question",
    "group_documents",
    "load_documents",
    "load_question_set",
    "load_questions",
    "locate_gold_paragraphs",
    "parse_document",
    "sample_questions",
]

_PARAGRAPH_SPLIT = re.compile(r"\n\s*\n")
# What query_knowledge accepts as a question: one it would refuse is a mistake in the file,
# found before the run, not an error counted among its figures.
_QUERY_TEXT: TypeAdapter[str] = TypeAdapter(QueryText)


class DatasetError(ValueError):
    """The question file or its documents are malformed; the message says where."""


@dataclass(frozen=True, slots=True)
class Question:
    """One question with its gold answers and the paragraph that holds them.

    ``org``, ``kind`` and ``gold_sentence`` are set by the callers-dev format only; its
    ``paragraph_index`` is None until ``locate_gold_paragraphs`` has found the paragraph,
    and stays None (with ``doc``) for an unanswerable question.
    """

    id: str
    question: str
    answers: tuple[str, ...]
    doc: str | None
    paragraph_index: int | None
    org: str | None = None
    kind: str | None = None
    gold_sentence: str | None = None
    # Earlier turns of the call, (role, content) oldest first, sent as query_knowledge's
    # ``history`` (bench/context_eval.py); none for the single-question sets.
    history: tuple[tuple[str, str], ...] = ()

    @property
    def answerable(self) -> bool:
        return bool(self.answers)

    @property
    def needs_all_answers(self) -> bool:
        """callers-dev's rule: a reply is right when it conveys every gold answer, each as
        whole tokens ("$26" is not in "$265"); squad-dev's answers are alternatives."""
        return self.org is not None


@dataclass(frozen=True, slots=True)
class Document:
    """A markdown document of the set, as uploaded and as split into paragraphs."""

    filename: str
    title: str
    paragraphs: tuple[str, ...]
    data: bytes
    media_type: str = "text/markdown"


_MARKDOWN_HEADING_RE = re.compile(r"(?m)^#{1,6}[ \t]*")
_MARKDOWN_EMPHASIS_RE = re.compile(r"\*\*|__")


def as_plain_text(document: Document) -> Document:
    """The document as someone would paste it into a text file: its heading marks and bold
    dropped, the rest as written (lists keep their dashes), uploaded as ``.txt``. The gold
    paragraphs stay those of the markdown: the words are the same."""
    text = document.data.decode("utf-8")
    plain = _MARKDOWN_EMPHASIS_RE.sub("", _MARKDOWN_HEADING_RE.sub("", text))
    return replace(
        document,
        filename=f"{Path(document.filename).stem}.txt",
        data=plain.encode("utf-8"),
        media_type="text/plain",
    )


def load_questions(path: Path) -> list[Question]:
    """Read a JSONL question file; raises DatasetError naming the line at fault."""
    if not path.is_file():
        raise DatasetError(f"{path}: not a file")
    questions: list[Question] = []
    seen: set[str] = set()
    with path.open("rb") as lines:
        for number, data in enumerate(lines, start=1):
            try:
                line = data.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(f"{path}:{number}: not UTF-8 text (byte {exc.start + 1})") from None
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                if not isinstance(raw, dict):
                    raise TypeError(f"a JSON object was expected, not {type(raw).__name__}")
                question = _callers_question(raw) if "org" in raw else _squad_question(raw)
            except RecursionError:
                raise DatasetError(f"{path}:{number}: not a question record (nested too deep)") from None
            except (ValueError, KeyError, TypeError, OverflowError) as exc:
                raise DatasetError(f"{path}:{number}: not a question record ({exc})") from exc
            if question.id in seen:
                raise DatasetError(f"{path}:{number}: duplicate id {question.id!r}")
            if questions and (question.org is None) != (questions[0].org is None):
                # One grading rule and one knowledge layout per run: a mixed file is a mistake.
                raise DatasetError(f"{path}:{number}: callers-dev and squad-dev records are mixed")
            seen.add(question.id)
            questions.append(question)
    if not questions:
        raise DatasetError(f"{path}: no questions")
    return questions


def _text(raw: dict[str, Any], field: str) -> str:
    """A string field: present and a string, never another type read as one (an id may be
    a whole number, as JSON writers often make it)."""
    value = raw.get(field)
    if field == "id" and type(value) is int:
        return str(value)
    if not isinstance(value, str):
        raise TypeError(
            f"{field} must be a string, not {'missing' if value is None else type(value).__name__}"
        )
    return value


def _optional_text(raw: dict[str, Any], field: str) -> str | None:
    return None if raw.get(field) is None else _text(raw, field)


def _answers(raw: dict[str, Any]) -> tuple[str, ...]:
    answers = raw.get("answers")
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise TypeError("answers must be a list of strings ([] for an unanswerable question)")
    return tuple(answers)


def _question_text(raw: dict[str, Any]) -> str:
    text = _text(raw, "question")
    try:
        _QUERY_TEXT.validate_python(text)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"]
        raise ValueError(f"question: {reason[0].lower()}{reason[1:]} (as query_knowledge requires)") from None
    return text


def _squad_question(raw: dict[str, Any]) -> Question:
    index = raw.get("paragraph_index")
    if type(index) is not int:
        raise TypeError("paragraph_index must be a whole number")
    return Question(
        id=_text(raw, "id"),
        question=_question_text(raw),
        answers=_answers(raw),
        doc=_text(raw, "doc"),
        paragraph_index=index,
    )


def _callers_question(raw: dict[str, Any]) -> Question:
    answers = _answers(raw)
    doc, gold_sentence = _optional_text(raw, "doc"), _optional_text(raw, "gold_sentence")
    if answers and (not doc or not gold_sentence):
        raise ValueError("an answerable question needs doc and gold_sentence")
    org = _text(raw, "org")
    if not org.strip() or "/" in org or org in {".", ".."}:
        raise ValueError(f"org {org!r} is not a folder name")
    if doc and not doc.startswith(f"{org}/"):
        raise ValueError(f"doc {doc!r} is not under its organisation {org!r}")
    return Question(
        id=_text(raw, "id"),
        question=_question_text(raw),
        answers=answers,
        doc=doc or None,
        paragraph_index=None,
        org=org,
        kind=_optional_text(raw, "kind"),
        gold_sentence=gold_sentence or None,
    )


def parse_document(filename: str, data: bytes) -> Document:
    """Split a markdown document into its title and paragraphs."""
    try:
        text = data.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{filename}: not UTF-8 text (byte {exc.start + 1})") from None
    first, _, rest = text.lstrip("\n").partition("\n")
    if first.startswith("# "):
        title = first[2:].strip()
    else:
        # No title line: every line is body text, and the file name stands in for a title.
        title, rest = Path(filename).stem, text
    paragraphs = tuple(p.strip() for p in _PARAGRAPH_SPLIT.split(rest) if p.strip())
    return Document(filename=filename, title=title, paragraphs=paragraphs, data=data)


def load_documents(directory: Path, questions: Sequence[Question]) -> dict[str, Document]:
    """Every markdown file of ``directory`` (its organisations' subfolders for callers-dev),
    named by its path under ``directory``, checked against what the questions point at."""
    if not directory.is_dir():
        raise DatasetError(f"{directory}: documents folder not found (use --docs)")
    by_org = any(q.org is not None for q in questions)
    documents = {
        name: parse_document(name, _read_document(directory, path))
        for path in sorted(directory.glob("*/*.md" if by_org else "*.md"))
        if not path.is_dir()
        for name in [path.relative_to(directory).as_posix()]
    }
    orgs = set(group_documents(documents)) if by_org else set()
    for question in questions:
        if question.org is not None and question.org not in orgs:
            raise DatasetError(f"question {question.id}: no documents in {directory / question.org}")
        if question.doc is None:
            continue
        document = documents.get(question.doc)
        if document is None:
            raise DatasetError(f"question {question.id}: document {question.doc!r} is not in {directory}")
        index = question.paragraph_index
        if index is not None and not 0 <= index < len(document.paragraphs):
            raise DatasetError(
                f"question {question.id}: {question.doc} has no paragraph {index} "
                f"(it has {len(document.paragraphs)})"
            )
    return documents


def _read_document(directory: Path, path: Path) -> bytes:
    """A document's bytes: a regular file inside ``directory``, links followed only to one
    inside it (as ``vk sync`` does), so that a link cannot put another file's text into a
    knowledge base and a report, and a pipe cannot stall the run."""
    name = path.relative_to(directory).as_posix()
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):  # RuntimeError: a loop of links
        raise DatasetError(f"{name}: a link to nothing") from None
    if not target.is_relative_to(directory.resolve()):
        raise DatasetError(f"{name}: a link to a file outside {directory}")
    if not target.is_file():
        raise DatasetError(f"{name}: not a regular file")
    return target.read_bytes()


def locate_gold_paragraphs(
    questions: Sequence[Question], documents: Mapping[str, Document]
) -> list[Question]:
    """The questions with ``paragraph_index`` set where only ``gold_sentence`` names the gold.

    The gold paragraph is the first paragraph of ``doc`` (as ``parse_document`` splits it)
    that contains ``gold_sentence``; whitespace is compared collapsed, since a sentence
    may be wrapped over lines in the file.
    """
    return [_located(question, documents) for question in questions]


def _located(question: Question, documents: Mapping[str, Document]) -> Question:
    if question.paragraph_index is not None or question.doc is None or not question.gold_sentence:
        return question
    sentence = _collapsed(question.gold_sentence)
    paragraphs = documents[question.doc].paragraphs
    index = next((i for i, p in enumerate(paragraphs) if sentence in _collapsed(p)), None)
    if index is None:
        raise DatasetError(f"question {question.id}: gold_sentence is not in {question.doc}")
    return replace(question, paragraph_index=index)


def group_documents(documents: Mapping[str, Document]) -> dict[str, dict[str, Document]]:
    """Documents by the knowledge base they belong to: their organisation's folder, or
    "" for a flat folder (squad-dev: one knowledge base for every question)."""
    groups: dict[str, dict[str, Document]] = {}
    for name, document in documents.items():
        org, _, _ = name.rpartition("/")
        groups.setdefault(org, {})[name] = document
    return groups


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def load_question_set(
    path: Path, docs_dir: Path | None = None, *, limit: int | None = None, seed: int = 0
) -> tuple[list[Question], dict[str, Document]]:
    """A question file (or a seeded sample of it) with its documents (``docs/`` beside it
    unless given), each question's gold paragraph located: what a run of ``vk eval`` asks.
    Every document is loaded, not only the sample's: a smaller knowledge base would make
    retrieval easier than on the full set."""
    picked = sample_questions(load_questions(path), limit, seed)
    documents = load_documents(docs_dir or path.parent / "docs", picked)
    return locate_gold_paragraphs(picked, documents), documents


def sample_questions(questions: Sequence[Question], limit: int | None, seed: int) -> list[Question]:
    """A seeded sample of ``limit`` questions that keeps the answerable/unanswerable mix.

    Each group is sampled on its own, in proportion to its share of the whole set, so a
    quick run scores not_found handling as much as the full run does. The sample keeps
    the file's order, and the same seed always picks the same questions.
    """
    if limit is None or limit >= len(questions):
        return list(questions)
    if limit < 1:
        raise DatasetError("--limit must be at least 1")
    answerable = [i for i, q in enumerate(questions) if q.answerable]
    unanswerable = [i for i, q in enumerate(questions) if not q.answerable]
    n_answerable = round(limit * len(answerable) / len(questions))
    rng = random.Random(seed)  # noqa: S311  # a reproducible sample, not a secret
    picked = rng.sample(answerable, n_answerable) + rng.sample(unanswerable, limit - n_answerable)
    return [questions[i] for i in sorted(picked)]
