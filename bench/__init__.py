"""Benchmarks, each run from the repository root as ``python -m bench.<name> [--help]``; the
figures they printed are in docs/BENCHMARKS.md.

Shared by all: ``harness`` (temporary folder, embedded PostgreSQL, ``vk`` commands, the service,
the OpenAI stub, driver processes), ``metering`` (CPU per process, foreign load, quiet waits),
``report`` (percentiles, JSON), ``seed`` (a knowledge set seeded by SQL, and questions for it),
``corpus`` (markdown documents to ingest), ``openai_stub`` and ``reference_app`` (the minimal
handler ``query --reference`` measures the service against).

Benchmarks: ``query`` (latency), ``load`` (fixed arrival rate), ``burst`` (one organisation's
burst beside another's calls), ``stream``, ``console``,
``ingest``, ``isolation``, ``sync``, ``crawl``, ``embed``, ``provider_client``, ``prompt_render``,
``webhook_trigger``, ``office_extraction``, ``html_extraction``; evaluations: ``context_eval``,
``semantic_cache_eval``; ``calibrate`` refits the offline default's confidence from `vk eval` reports.
"""
