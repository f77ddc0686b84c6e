"""Question sets and their documents, in the format of ``../shared/eval/squad-dev``.

One question per line of a JSONL file::

    {"id": "...", "question": "...", "answers": ["..."], "doc": "Oxygen.md", "paragraph_index": 3}

``answers == []`` marks a question the documents cannot answer. Documents are markdown
files: a ``# Title`` line, then paragraphs separated by blank lines; ``paragraph_index``
counts those paragraphs from 0, after the title line.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DatasetError",
    "Document",
    "Question",
    "load_documents",
    "load_questions",
    "parse_document",
    "sample_questions",
]

_PARAGRAPH_SPLIT = re.compile(r"\n\s*\n")


class DatasetError(ValueError):
    """The question file or its documents are malformed; the message says where."""


@dataclass(frozen=True, slots=True)
class Question:
    """One question with its gold answers and the paragraph that holds them."""

    id: str
    question: str
    answers: tuple[str, ...]
    doc: str
    paragraph_index: int

    @property
    def answerable(self) -> bool:
        return bool(self.answers)


@dataclass(frozen=True, slots=True)
class Document:
    """A markdown document of the set, as uploaded and as split into paragraphs."""

    filename: str
    title: str
    paragraphs: tuple[str, ...]
    data: bytes


def load_questions(path: Path) -> list[Question]:
    """Read a JSONL question file; raises DatasetError naming the line at fault."""
    questions: list[Question] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                question = Question(
                    id=str(raw["id"]),
                    question=str(raw["question"]),
                    answers=tuple(str(a) for a in raw["answers"]),
                    doc=str(raw["doc"]),
                    paragraph_index=int(raw["paragraph_index"]),
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise DatasetError(f"{path}:{number}: not a question record ({exc})") from exc
            if question.id in seen:
                raise DatasetError(f"{path}:{number}: duplicate id {question.id!r}")
            seen.add(question.id)
            questions.append(question)
    if not questions:
        raise DatasetError(f"{path}: no questions")
    return questions


def parse_document(filename: str, data: bytes) -> Document:
    """Split a markdown document into its title and paragraphs."""
    text = data.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n")
    first, _, rest = text.lstrip("\n").partition("\n")
    if first.startswith("# "):
        title = first[2:].strip()
    else:
        # No title line: every line is body text, and the file name stands in for a title.
        title, rest = Path(filename).stem, text
    paragraphs = tuple(p.strip() for p in _PARAGRAPH_SPLIT.split(rest) if p.strip())
    return Document(filename=filename, title=title, paragraphs=paragraphs, data=data)


def load_documents(directory: Path, questions: Sequence[Question]) -> dict[str, Document]:
    """Every markdown file of ``directory``, checked against what the questions point at."""
    if not directory.is_dir():
        raise DatasetError(f"{directory}: documents folder not found (use --docs)")
    documents = {
        path.name: parse_document(path.name, path.read_bytes()) for path in sorted(directory.glob("*.md"))
    }
    for question in questions:
        document = documents.get(question.doc)
        if document is None:
            raise DatasetError(f"question {question.id}: document {question.doc!r} is not in {directory}")
        if not 0 <= question.paragraph_index < len(document.paragraphs):
            raise DatasetError(
                f"question {question.id}: {question.doc} has no paragraph {question.paragraph_index} "
                f"(it has {len(document.paragraphs)})"
            )
    return documents


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
