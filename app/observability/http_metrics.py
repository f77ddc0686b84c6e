"""Litestar's Prometheus middleware, counting each request by the status its client got.

The stock middleware takes the status from the response it sees pass. An error raised by an
inner middleware (the API key check: 401, 429, or 503 when the database is down) is answered
by the exception handlers outside it, so it counted 200; and a client that hung up while its
body was read counted 500. Here a request that ends in an exception is counted by the status
the handlers answer it with (``status_of``), a client gone as 499.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from litestar.plugins.prometheus import PrometheusMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from app.exception_handlers import status_of


class StatusTrueMetrics(PrometheusMiddleware):
    def __init__(self, app: ASGIApp, config: Any) -> None:
        super().__init__(app, config)
        inner = self.app

        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            try:
                await inner(scope, receive, send)
            except BaseException as exc:
                span = getattr(send, "span", None)
                if span is not None and not span.get("started"):
                    span["status_code"] = status_of(exc)
                    # The answer is sent outside: its time is the time until now (a 503 after
                    # a database that hung for seconds is no 0 s request).
                    span["duration"] = time.perf_counter() - span["start_time"]
                raise

        self.app = counted

    def _get_wrapped_send(self, send: Send, request_span: dict[str, float]) -> Callable[..., Any]:
        wrapped = super()._get_wrapped_send(send, request_span)

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                request_span["started"] = True
            await wrapped(message)

        tracked.span = request_span  # type: ignore[attr-defined]  # read by `counted` above
        return tracked
