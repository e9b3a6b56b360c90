"""Errors the service functions raise; the API maps each to its HTTP status.

Messages say what was wrong and what to do, because they reach the user verbatim.
"""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """Base class: a request the service refuses, with a status and a readable message."""

    status_code = 400
    code = "bad-request"

    def __init__(self, message: str, detail: Any = None):
        super().__init__(message)
        self.message = message
        self.detail = detail


class BadRequest(ServiceError):
    status_code = 400
    code = "bad-request"


class Unauthorized(ServiceError):
    status_code = 401
    code = "unauthorized"


class Forbidden(ServiceError):
    status_code = 403
    code = "forbidden"


class NotFound(ServiceError):
    status_code = 404
    code = "not-found"


class Conflict(ServiceError):
    status_code = 409
    code = "conflict"


class TooLarge(ServiceError):
    status_code = 413
    code = "too-large"


class RateLimited(ServiceError):
    status_code = 429
    code = "rate-limited"
