"""Errors that carry their own status code, rendered by one handler as
``{"error": <code>, "detail": <sentence>}`` (plus ``fields`` for validation errors)."""

from __future__ import annotations

from typing import Any, ClassVar


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
