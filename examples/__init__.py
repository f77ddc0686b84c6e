"""Runnable examples of wiring query_knowledge into voice runtimes (docs/INTEGRATION.md).

Each module builds its platform's payloads with pure functions, so tests can check them
against the platform SDK's own types; importing a module needs no network and no SDK
beyond what this project installs."""
