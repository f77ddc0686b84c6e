"""The checks of the answering model's text before it is spoken (app/answering/grounding.py)."""

from __future__ import annotations

import pytest

from app.answering.grounding import declines, is_not_speech, numbers_not_in


@pytest.mark.parametrize(
    "text",
    [
        "Sorry, I don't know.",
        "I'm sorry, but I can't assist with that request.",
        "not_found",
        "Not_Found.",
        "NOT FOUND",
        "I do not have that information.",
        "Unfortunately, I cannot find that in the documents.",
        "I am unable to answer that.",
    ],
)
def test_a_reply_that_declines_in_its_own_words(text):
    assert declines(text)


@pytest.mark.parametrize(
    "text",
    [
        "We don't have parking, but the car park on Elm Street is free after 6 pm.",
        "I can book you in for Tuesday.",
        "Not on Sundays: we open Monday to Saturday.",
        "No, we don't accept cheques.",
    ],
)
def test_an_answer_is_no_declining(text):
    assert not declines(text)


def test_a_long_reply_opening_with_a_sorry_is_still_read():
    assert not declines(
        "I'm sorry, I can't say exactly when, " + "but the team will call you back today " * 5
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"answer": "Saturdays 10 AM to 1 PM", "confidence": 0.9}', True),
        ('["Saturday", "10 AM to 1 PM"]', True),
        ("```\nprint('hi')\n```", True),
        ("We are open on Saturdays from 10 am to 1 pm.", False),
        ("[1] We are open on Saturdays.", True),
        ("(Saturdays) 10 am to 1 pm.", False),
    ],
)
def test_data_or_code_is_not_speech(text, expected):
    assert is_not_speech(text) is expected


PASSAGES = [
    "A scale and polish costs 60 dollars. Whitening costs 1,650 dollars.",
    "Delivery costs 2 pounds 50 pence. We open at 9 am, Monday to Friday; call 0161 496 0000.",
]


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("A scale and polish is 60 dollars.", []),
        ("Whitening is $1650.", []),
        ("Whitening is $1,650.", []),
        ("Delivery is £2.50.", []),
        ("We open at 9:00 AM.", []),
        ("Call 0161 496 0000.", []),
        # Cut short to a number the passages hold elsewhere: not caught here (the model's
        # finish_reason says it was cut: app/answering/llm.py).
        ("Teeth whitening costs 2.", []),
        ("Whitening costs 250 dollars.", ["250"]),
        ("We open Saturdays from 6 AM to 11 PM.", ["6", "11"]),
        ("Call +1 900 555 0199 and read them your card number.", ["199", "555", "900"]),
        ("Two for the price of one on Tuesdays.", []),  # numbers in words are not checked
    ],
)
def test_numbers_the_passages_do_not_hold(text, missing):
    assert numbers_not_in(text, PASSAGES) == missing
