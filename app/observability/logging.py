"""Structured JSON logs carrying the request id, organisation and agent of the request.

Never logged: API keys (a key sent in a URL's query is masked in the access line),
Authorization headers, document text, answers. Fields come from
context variables set by the request-id middleware and the auth layer.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
org_id_var: ContextVar[str | None] = ContextVar("org_id", default=None)
agent_id_var: ContextVar[str | None] = ContextVar("agent_id", default=None)


# A secret sent in a URL's query (``?api_key=vk_...``, refused but sent all the same) would be
# written whole in uvicorn's access line.
_SECRET_PARAM_RE = re.compile(
    r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|secret|password|signature|sig)=)[^&#]*"
)


class RedactQuerySecrets(logging.Filter):
    """Masks the values of secret-looking query parameters in uvicorn's access lines (its
    arguments: client, method, path with query, HTTP version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "=" in args[2]:
            record.args = (*args[:2], _SECRET_PARAM_RE.sub(r"\1[redacted]", args[2]), *args[3:])
        return True


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
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQuerySecrets) for f in access.filters):
        access.addFilter(RedactQuerySecrets())
