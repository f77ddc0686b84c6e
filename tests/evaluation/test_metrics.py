"""Metric functions of the evaluation, with hand-made inputs and hand-computed numbers."""

import pytest

from app.evaluation.dataset import Question, parse_document, sample_questions
from app.evaluation.metrics import (
    GoldPassage,
    answer_sentence,
    best_f1,
    contains_all_gold,
    contains_gold,
    first_gold_rank,
    hit_at_k,
    model_costs,
    mrr_at_k,
    not_found_scores,
    percentile,
    spoken_forms,
    squad_normalise,
    token_f1,
)

# Gold ranks of four questions: first, third, never, second.
RANKS = [1, 3, None, 2]


def test_first_gold_rank_is_one_based():
    assert first_gold_rank([False, False, True, True]) == 3


def test_first_gold_rank_without_gold_is_none():
    assert first_gold_rank([False, False]) is None


@pytest.mark.parametrize(("k", "expected"), [(1, 0.25), (2, 0.5), (3, 0.75), (5, 0.75)])
def test_hit_at_k(k, expected):
    assert hit_at_k(RANKS, k) == expected


def test_mrr_averages_reciprocal_ranks_with_misses_as_zero():
    assert mrr_at_k(RANKS, 10) == pytest.approx((1 + 1 / 3 + 0 + 1 / 2) / 4, abs=1e-12)


def test_mrr_ignores_ranks_beyond_k():
    assert mrr_at_k([1, 11], 10) == 0.5


def test_retrieval_metrics_of_no_questions_are_none():
    assert (hit_at_k([], 1), mrr_at_k([])) == (None, None)


def test_squad_normalisation_drops_case_punctuation_and_articles():
    assert squad_normalise("The  U.S. Army!") == "us army"


def test_token_f1_of_a_longer_answer():
    # prediction: premier, of, victoria; gold: premier -> precision 1/3, recall 1
    assert token_f1("the Premier of Victoria", "Premier") == 0.5


def test_token_f1_counts_repeated_words_once_per_occurrence():
    # common = min(2, 1) for "four" -> precision 1/3, recall 1/2 -> F1 0.4
    assert token_f1("four four years", "four weeks") == pytest.approx(0.4, abs=1e-12)


def test_token_f1_takes_the_best_gold_answer():
    assert best_f1("every four years", ["four", "every four years."]) == 1.0


def test_token_f1_of_two_empty_answers_is_one():
    assert token_f1("", "a") == 1.0  # both normalise to nothing


def test_token_f1_without_gold_is_zero():
    assert best_f1("anything", []) == 0.0


def test_spoken_form_of_a_percentage():
    assert spoken_forms("90%") == ["90%", "90 percent"]


def test_spoken_form_of_an_ordinal():
    assert spoken_forms("21st") == ["21st", "twenty-first"]


def test_spoken_forms_of_a_phone_number_read_digit_by_digit():
    # Alone, "1300 123 456" could be three numbers; after "call" it is said digit by digit.
    assert spoken_forms("1300 123 456") == [
        "1300 123 456",
        "one three zero zero, one two three, four five six",
    ]
    # An amount in thousands is no number to dial, even after "call".
    assert spoken_forms("1 400 000 visitors") == ["1 400 000 visitors"]
    assert contains_all_gold(
        "Text our mobile on zero four nine one, five seven zero, one five six.", ["0491 570 156"]
    )


def test_spoken_forms_of_a_zip_code_read_digit_by_digit():
    assert spoken_forms("04101") == ["04101", "zero four one zero one"]
    assert contains_gold("We are at 12 Harbor Rd, Portland, ME zero four one zero one.", ["04101"])


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("In an emergency call nine nine nine.", "999"),
        ("Our company registration number is five eight four zero one seven.", "584017"),
        ("Please arrive by 9:30 on the day.", "9.30"),
    ],
)
def test_a_gold_said_so_only_in_context_is_found(answer: str, gold: str) -> None:
    assert contains_all_gold(answer, [gold])


def test_answer_in_spoken_form_contains_gold():
    assert contains_gold("Members pay 90 percent of the list price.", ["90%"]) is True


def test_contains_gold_ignores_case_and_spacing():
    assert contains_gold("BSKYB   was formed in 1990.", ["BSkyB"]) is True


def test_answer_without_any_gold_form_does_not_contain_gold():
    assert contains_gold("We open at nine.", ["10 am", "ten"]) is False


def test_not_found_precision_and_recall():
    scores = not_found_scores(
        [
            (False, "not_found"),  # right: unanswerable and said so
            (True, "not_found"),  # false not_found
            (False, "answered"),  # missed not_found
            (False, "unavailable"),  # missed as well: unavailable is not not_found
            (True, "answered"),
        ]
    )
    assert (scores.precision, scores.recall) == (0.5, pytest.approx(1 / 3, abs=1e-12))


def test_not_found_scores_without_positives_are_none():
    scores = not_found_scores([(True, "answered")])
    assert (scores.precision, scores.recall) == (None, None)


def test_percentile_interpolates_between_ranks():
    values = [40.0, 10.0, 30.0, 20.0]
    assert [percentile(values, q) for q in (0, 50, 90, 100)] == [10.0, 25.0, pytest.approx(37.0), 40.0]


def test_percentile_of_nothing_is_none():
    assert percentile([], 50) is None


def test_cost_per_1000_calls():
    # 1000 * (120 * 0.15 + 12 * 0.60) / 1e6 and 1000 * 10 * 0.02 / 1e6
    cost = model_costs({"gpt-4o-mini": (120, 12)}, 10)
    assert cost == {
        "llm": pytest.approx(0.0252, abs=1e-12),
        "embedding": pytest.approx(0.0002, abs=1e-12),
        "total": pytest.approx(0.0254, abs=1e-12),
    }


def test_answer_sentence_is_the_sentence_holding_the_answer():
    paragraph = "First comes this. The answer is   here, in the middle. Last one."
    assert answer_sentence(paragraph, ["missing", "here"]) == "The answer is here, in the middle."


def test_answer_sentence_spans_an_answer_that_crosses_a_sentence_end():
    assert answer_sentence("One. Two ends. Three starts. Four.", ["ends. Three"]) == "Two ends. Three starts."


def test_gold_paragraph_that_fits_a_chunk_must_be_whole():
    gold = GoldPassage.build(
        "doc", "Alpha beta.\nGamma delta.", ["Gamma"], paragraph_tokens=8, chunk_tokens=500
    )
    matches = (
        gold.matches("doc", "Before. Alpha beta. Gamma delta. After."),
        gold.matches("doc", "Gamma delta. After."),
        gold.matches("other", "Alpha beta. Gamma delta."),
    )
    assert matches == (True, False, False)


def test_gold_paragraph_longer_than_a_chunk_matches_its_answer_sentence_or_start():
    paragraph = "Opening words of a long paragraph. " + "Filler sentence. " * 30 + "The answer is 42. Tail."
    gold = GoldPassage.build("doc", paragraph, ["42"], paragraph_tokens=600, chunk_tokens=500)
    matches = (
        gold.matches("doc", "Filler sentence. The answer is 42. Tail."),  # the answer's sentence
        gold.matches("doc", paragraph[:250]),  # the first 200 characters
        gold.matches("doc", "Filler sentence. Filler sentence. Tail."),  # neither
    )
    assert matches == (True, True, False)


def test_parse_document_splits_title_and_paragraphs():
    document = parse_document("X.md", b"# The Title\n\nFirst paragraph\nstill first.\n\n\nSecond.\n")
    assert (document.title, document.paragraphs) == (
        "The Title",
        ("First paragraph\nstill first.", "Second."),
    )


def _questions(answerable: int, unanswerable: int) -> list[Question]:
    return [
        Question(f"q{i}", f"question {i}", ("x",) if i < answerable else (), "X.md", 0)
        for i in range(answerable + unanswerable)
    ]


def test_sample_keeps_the_answerable_share_and_the_file_order():
    picked = sample_questions(_questions(40, 60), 10, seed=7)
    ids = [q.id for q in picked]
    assert (sum(q.answerable for q in picked), ids == sorted(ids, key=lambda i: int(i[1:]))) == (4, True)


def test_sample_is_the_same_for_the_same_seed():
    questions = _questions(40, 60)
    assert sample_questions(questions, 10, seed=3) == sample_questions(questions, 10, seed=3)


def test_gold_paragraph_ignores_zero_width_characters_that_extraction_drops():
    gold = GoldPassage.build(
        "doc", "model—\u200b\u200bmany leaders", [], paragraph_tokens=5, chunk_tokens=500
    )
    assert gold.matches("doc", "the model—many leaders of the colony") is True
