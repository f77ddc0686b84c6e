"""Structured JSON logs carrying the request id, organisation and agent of the request.

Never logged: API keys, Authorization headers, document text, answers. Fields come from
context variables set by the request-id middleware and the auth layer.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
org_id_var: ContextVar[str | None] = ContextVar("org_id", default=None)
agent_id_var: ContextVar[str | None] = ContextVar("agent_id", default=None)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name, var in (("request_id", request_id_var), ("org_id", org_id_var), ("agent_id", agent_id_var)):
            value = var.get()
            if value:
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # httpx logs every request URL at INFO; fetched URLs may carry tokens in their query.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # pgserver narrates every pg_ctl call at INFO, a dozen multi-line records per start and
    # stop of the embedded PostgreSQL; `vk serve` says in words where it runs and when it stops.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
