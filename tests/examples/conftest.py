"""The examples are checked against declarations the real app serves, for the FAQ agent of
the query tests."""

from tests.query.conftest import faq_agent

__all__ = ["faq_agent"]
