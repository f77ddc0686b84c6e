"""Rows of a table (Word, Excel, CSV) answer as whole rows: a caller asking about one item
hears that item's cells, never a cell of the row above or below."""

from __future__ import annotations

from typing import Any

import pytest
from litestar import Litestar

from app.config import Settings
from app.main import create_app
from tests.conftest import fake_resolver
from tests.helpers import assign_new_agent, create_kb

MENU = (
    "Dish,Price,Allergens\r\n"
    "Thai coconut soup,£6.50,Gluten free\r\n"
    'Tomato and basil soup,£5.50,"Gluten, milk"\r\n'
    'Chicken club sandwich,£9.95,"Gluten, egg, mustard"\r\n'
    'Chocolate brownie,£4.00,"Egg, milk, gluten, soya"\r\n'
)
STAFF = (
    "Name,Role,Extension\r\n"
    "Dr Susan Lee,Dentist,214\r\n"
    "Dr Omar Khan,Orthodontist,221\r\n"
    "Tom Becker,Billing and insurance,230\r\n"
    "Priya Patel,Practice manager,201\r\n"
)


@pytest.fixture
def app(database_url: str, semantic_settings: Settings) -> Litestar:
    return create_app(semantic_settings, database_url=database_url, resolver=fake_resolver, run_workers=False)


async def _agent_with(client: Any, org: Any, drain_queue: Any, name: str, csv: str) -> str:
    kb = await create_kb(client, org.headers, name)
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": (f"{name}.csv", csv.encode(), "text/csv")},
        headers=org.headers,
    )
    assert r.status_code == 202, r.text
    assert await drain_queue() == {"ready": 1}
    return await assign_new_agent(client, org.headers, kb["id"])


async def _answer(client: Any, org: Any, agent: str, question: str) -> str:
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": question}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "answered", body
    answer: str = body["answer"]
    return answer


async def test_an_allergen_question_hears_its_own_dish(client, org, drain_queue):
    # Cell by cell, the Thai soup's "Gluten free." was read out for the tomato soup.
    agent = await _agent_with(client, org, drain_queue, "Menu", MENU)
    answer = await _answer(client, org, agent, "Is the tomato soup gluten free?")
    assert answer.startswith(
        "Dish: Tomato and basil soup; Price: 5 pounds 50 pence; Allergens: Gluten, milk."
    )
    assert "Gluten free" not in answer


async def test_a_staff_members_extension_is_said_with_the_name(client, org, drain_queue):
    # Cell by cell, "Name: Dr Susan Lee. Role: Dentist." left out the extension asked for.
    agent = await _agent_with(client, org, drain_queue, "Staff", STAFF)
    answer = await _answer(client, org, agent, "What's Dr Lee's extension?")
    assert answer.startswith("Name: Dr Susan Lee; Role: Dentist; Extension: 214.")


async def test_a_row_whose_first_column_has_no_name_is_read_alone(client, org, drain_queue):
    unnamed = MENU.replace("Dish,Price", ",Price", 1)
    agent = await _agent_with(client, org, drain_queue, "Menu", unnamed)
    answer = await _answer(client, org, agent, "Is the tomato soup gluten free?")
    assert answer.startswith("Tomato and basil soup; Price: 5 pounds 50 pence; Allergens: Gluten, milk.")
    assert "Gluten free" not in answer


async def _status(client: Any, org: Any, agent: str, question: str) -> dict[str, Any]:
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": question}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_an_item_the_table_does_not_list_is_not_given_another_rows_price(client, org, drain_queue):
    # The nearest rows (the sandwich's and the brownie's) were read for the lasagne at 0.40.
    agent = await _agent_with(client, org, drain_queue, "Menu", MENU)
    body = await _status(client, org, agent, "What's the price of the lasagne?")
    assert (body["status"], body["confidence"]) == ("not_found", 0.0)
    assert "pounds" not in body["answer"]


async def test_a_role_the_table_does_not_list_is_not_given_another_rows_extension(client, org, drain_queue):
    agent = await _agent_with(client, org, drain_queue, "Staff", STAFF)
    body = await _status(client, org, agent, "What's the extension for the receptionist?")
    assert (body["status"], body["confidence"]) == ("not_found", 0.0)


async def test_a_row_the_question_meets_in_a_cell_is_still_read(client, org, drain_queue):
    # "handles" is in no row, but "billing" is in Tom Becker's: the row is the one asked for.
    agent = await _agent_with(client, org, drain_queue, "Staff", STAFF)
    answer = await _answer(client, org, agent, "Who handles billing?")
    assert answer.startswith("Name: Tom Becker; Role: Billing and insurance; Extension: 230.")
