"""Errors that carry their own status code, rendered by one handler as
``{"error": <code>, "detail": <sentence>}`` (plus ``fields`` for validation errors)."""

from __future__ import annotations

from typing import Any, ClassVar


def size_text(n: int) -> str:
    """A byte count as a limit is said: "20 MB", "1.5 MB", "64 KB", "1,000 bytes" (not the
    "0 MB" that dividing 2,048 bytes by a megabyte gave)."""
    mb, kb = 1024 * 1024, 1024
    if n >= mb:
        return f"{n // mb} MB" if n % mb == 0 else f"{n / mb:.1f} MB"
    if n >= kb and n % kb == 0:
        return f"{n // kb} KB"
    return f"{n:,} bytes"


class AppError(Exception):
    status_code: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    headers: dict[str, str] | None = None

    def __init__(self, detail: str, *, headers: dict[str, str] | None = None, extra: Any = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers
        self.extra = extra


class BadRequest(AppError):
    status_code = 400
    code = "bad_request"


class Unauthorized(AppError):
    status_code = 401
    code = "unauthorized"


class Forbidden(AppError):
    status_code = 403
    code = "forbidden"


class NotFound(AppError):
    status_code = 404
    code = "not_found"


class Conflict(AppError):
    status_code = 409
    code = "conflict"


class PayloadTooLarge(AppError):
    status_code = 413
    code = "payload_too_large"


class UnsupportedMediaType(AppError):
    status_code = 415
    code = "unsupported_media_type"


class ValidationFailed(AppError):
    status_code = 422
    code = "validation_error"


class TooManyRequests(AppError):
    status_code = 429
    code = "rate_limited"


class QuotaExceeded(AppError):
    """A stored-size or count quota: waiting does not help, so 403 rather than 429."""

    status_code = 403
    code = "quota_exceeded"


class ServiceUnavailable(AppError):
    status_code = 503
    code = "unavailable"
