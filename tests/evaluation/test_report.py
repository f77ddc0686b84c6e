"""The report's figures (app/evaluation/report.py) from scored rows, and how it shows them."""

from __future__ import annotations

import io
from typing import Any

from app.evaluation.progress import Progress
from app.evaluation.report import eval_report, md_cell, summarise
from app.evaluation.runner import Row


def _row(question_id: str, *, gold_rank: int | None, cached: bool = False, kind: str | None = None) -> Row:
    candidates: list[dict[str, Any]] = [] if cached else [{"rank": 1, "chunk_id": 1, "gold": gold_rank == 1}]
    return Row(
        id=question_id,
        question=f"question {question_id}?",
        answers=["gold"],
        doc="faq.md",
        paragraph_index=0,
        answerable=True,
        variant=None,
        http_status=200,
        status="answered",
        answer="gold",
        confidence=0.5,
        cached=cached,
        gold_rank=gold_rank,
        correct=True,
        candidates=candidates,
        kind=kind,
    )


def test_a_reply_reused_by_the_semantic_cache_is_left_out_of_retrieval() -> None:
    # Found first, missed, and one served from the semantic cache: no candidates to score.
    rows = [
        _row("a", gold_rank=1, kind="direct"),
        _row("b", gold_rank=None, kind="direct"),
        _row("c", gold_rank=None, cached=True, kind="direct"),
    ]
    summary = summarise(rows)
    assert summary["retrieval"]["hit@1"] == 0.5
    assert summary["retrieval"]["hit@5"] == 0.5
    assert summary["retrieval"]["reused"] == 1
    assert summary["by_kind"]["direct"]["hit@5"] == 0.5
    # Its answer still counts: the caller heard it.
    assert summary["answers"]["contains_gold"] == 1.0


def test_an_exact_cache_hit_with_its_candidates_is_scored() -> None:
    row = _row("a", gold_rank=1)
    row.cached = True  # cached, yet it carries what retrieval found
    summary = summarise([row, _row("b", gold_rank=None)])
    assert (summary["retrieval"]["hit@5"], summary["retrieval"]["reused"]) == (0.5, 0)


def test_a_table_cell_shows_text_as_written_never_as_markup() -> None:
    # A question is the caller's text: it must not become HTML or a new table column in report.md.
    assert md_cell('<img src=x onerror="alert(1)"> a|b\x00\x1b[31m') == (
        '&lt;img src=x onerror="alert(1)"&gt; a\\|b[31m'
    )


def test_progress_promises_no_time_before_it_has_a_rate() -> None:
    stream = io.StringIO()
    progress = Progress(6814, "asking", stream=stream)
    progress.advance()
    assert stream.getvalue().rstrip("\n").endswith("eta -:--")


def test_answers_the_model_did_not_make_are_counted_in_the_headline() -> None:
    # A refused model answer is replaced by the passage read out (degraded): a prompt
    # credited with those answers looked better than it was.
    made, refused = _row("a", gold_rank=1), _row("b", gold_rank=1)
    refused.degraded = True
    summary = summarise([made, refused])
    assert summary["answers"]["degraded"] == 1
    _, markdown = eval_report({}, [made, refused])
    assert "| Model answers not used (degraded) | 1 |" in markdown.splitlines()


def _answered_by(question_id: str, model: str | None, prompt: int, completion: int) -> Row:
    row = _row(question_id, gold_rank=1)
    row.model, row.prompt_tokens, row.completion_tokens = model, prompt, completion
    return row


def test_each_models_tokens_are_costed_at_its_own_price() -> None:
    # A variant answering with gpt-4.1 was costed at gpt-4o-mini's prices.
    rows = [_answered_by("a", "gpt-4.1-2025-04-14", 1000, 100), _answered_by("b", "gpt-4o-mini", 1000, 100)]
    summary = summarise(rows)
    # Per call: 500 + 50 tokens of each. 1000 * (500 * 2.00 + 50 * 8.00) / 1e6 = 1.4 dollars for
    # gpt-4.1, 1000 * (500 * 0.15 + 50 * 0.60) / 1e6 = 0.105 for gpt-4o-mini.
    assert summary["cost_per_1000_calls_usd"] == {"llm": 1.505, "embedding": 0.0, "total": 1.505}
    assert summary["prices_usd_per_million_tokens"]["llm"] == {
        "gpt-4.1-2025-04-14": [2.0, 8.0],
        "gpt-4o-mini": [0.15, 0.6],
    }


def test_a_model_without_a_listed_price_has_no_cost() -> None:
    summary = summarise([_answered_by("a", "our-fine-tune", 1000, 100), _answered_by("b", None, 0, 0)])
    assert summary["cost_per_1000_calls_usd"] == {"llm": None, "embedding": 0.0, "total": None}
    assert summary["prices_usd_per_million_tokens"]["llm"] == {"our-fine-tune": None}
