"""The checks of the answering model's text before it is spoken (app/answering/grounding.py)."""

from __future__ import annotations

import pytest

from app.answering.grounding import declines, echoes, is_not_speech, numbers_not_in


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


@pytest.mark.parametrize(
    "text",
    [
        # A partial answer, as the grounding prompt asks for: what it has, then what it lacks.
        "I don't have the Saturday hours, but on weekdays we are open 9 am to 5 pm.",
        "I can't see your booking, but cancellations are free up to a day before.",
        "Not found anywhere else, this offer is only online.",
        "I don't know about Sundays; on weekdays we open at 9.",
    ],
)
def test_a_reply_that_declines_part_and_answers_the_rest_is_read(text):
    assert not declines(text)


def test_a_curly_apostrophe_declines_as_well():
    assert declines("I don\u2019t know.")


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
        ("[1] We are open on Saturdays.", False),  # a citation mark, stripped when spoken
        ("[ 2024 update ] prices rose.", False),
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


@pytest.mark.parametrize(
    ("text", "source"),
    [
        ("We open 9am to 5pm.", "Opening hours: 09:00-17:00."),
        ("Last entry is 5:30 pm.", "Last entry 17:30."),
        ("It costs £2.50.", "It costs 2.5 pounds."),
        ("Refunds take 5 working days.", "Refunds take five working days."),
        ("We close at 12 pm on Fridays.", "On Fridays we close at noon."),
        ("The office is on the 1st floor.", "The office is on the first floor."),
        ("It costs €1,650.", "Es kostet 1.650 €."),
        ("It costs €1650.", "Es kostet 1 650 €."),
        ("Room \uff12 is free.", "Room 2 is free."),  # a fullwidth digit
        ("Room \u0663 is free.", "Room 3 is free."),  # an Arabic-Indic digit
    ],
)
def test_a_number_the_source_says_another_way_is_held(text, source):
    assert numbers_not_in(text, [source]) == []


INSTRUCTIONS = (
    "You answer a caller's question during a live phone call. Use ONLY the knowledge in the user"
    " message. Do not add facts from anywhere else, and never guess. Answer in one to three short"
    ' sentences, for example "we are open from 9 am to 5 pm on weekdays".'
)


@pytest.mark.parametrize(
    ("text", "sources", "expected"),
    [
        # Eight words in a row of the instructions, in any case and punctuation.
        ("Sure: use only the knowledge in the user message, and never guess.", [], True),
        ("I must not add facts from anywhere else, and never guess!", ["Parking is free."], True),
        # Seven are no run; the instructions' example said as an answer a passage gives is one.
        ("Use only the knowledge in the user, thanks.", [], False),
        ("We are open from 9 am to 5 pm on weekdays.", ["We are open from 9 am to 5 pm on weekdays."], False),
        ("Parking is free behind the building, entrance on Elm Street.", ["Parking is free."], False),
        # The instructions' quoted example is what an answer should sound like.
        ("We are open from 9 am to 5 pm on weekdays, and Saturdays.", ["Saturdays: 10 to 1."], False),
    ],
    ids=["instructions", "instructions-again", "seven-words", "example-a-passage-holds", "answer", "example"],
)
def test_an_answer_that_repeats_its_instructions(text, sources, expected):
    assert echoes(text, INSTRUCTIONS, sources) is expected
