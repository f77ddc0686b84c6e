"""Evaluation tooling: measure retrieval and answers on a question set, compare prompt
variants, and replay logged traffic with another variant.

Everything here drives the service through its HTTP API, in-process (an embedded
PostgreSQL in a temporary folder and Litestar's test client) or against a running service,
so what is measured is what callers get. The service never imports this package; the
``vk eval`` and ``vk replay`` commands do. See ``docs/PROMPTS.md``.
"""
