"""Errors as JSON: every failure answers ``{"error": {"type": ..., "message": ...}}`` with a fitting status, never a
traceback.

`ApiError` is what the routes raise; agentgrad's own errors (an unknown artifact, a stale head, a bad config) are
mapped to statuses here, and anything unexpected is logged and answered as a plain 500 message.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from agentgrad import errors as core
from agentgrad.cli.rundir import RunDirError

LOG = logging.getLogger("agentgrad.service")

# agentgrad's errors, most specific first: (class, status, type)
_MAPPING: tuple[tuple[type[Exception], int, str], ...] = (
    (core.UnknownArtifactError, 404, "not_found"),
    (core.UnknownVersionError, 404, "not_found"),
    (RunDirError, 409, "run_dir"),
    (core.StaleHeadError, 409, "conflict"),
    (core.ApplyConflictError, 409, "conflict"),
    (core.FrozenLayerError, 409, "conflict"),
    (core.DamagedStoreError, 409, "damaged_store"),
    (core.ConfigError, 422, "invalid_config"),
    (core.InvalidIdError, 422, "invalid_id"),
    (core.AgentgradError, 400, "bad_request"),
)


class ApiError(Exception):
    """An error the API answers with `status` and ``{"error": {"type": kind, "message": message}}``."""

    def __init__(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.headers = status, kind, message, headers


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", what)


def body(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON error body."""
    return {"error": {"type": kind, "message": message, **extra}}


def _validation_message(exc: RequestValidationError) -> tuple[str, list[dict[str, Any]]]:
    details = [{"loc": [str(p) for p in e.get("loc", ())], "message": str(e.get("msg", ""))} for e in exc.errors()]
    text = "; ".join(f"{'.'.join(d['loc'])}: {d['message']}" for d in details) or "invalid request"
    return text, details


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return JSONResponse(body(exc.kind, exc.message), status_code=exc.status, headers=exc.headers)


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    message, details = _validation_message(exc)
    return JSONResponse(body("validation", message, details=details), status_code=422)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http")
    return JSONResponse(body(kind, str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


def core_status(exc: core.AgentgradError | RunDirError) -> tuple[int, str]:
    """The status and type an agentgrad error is answered with."""
    for kind, status, name in _MAPPING:
        if isinstance(exc, kind):
            return status, name
    return 400, "bad_request"


async def _core(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, core.AgentgradError)
    status, kind = core_status(exc)
    return JSONResponse(body(kind, str(exc)), status_code=status)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    LOG.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse(body("internal", f"internal error ({type(exc).__name__}); see the service log"),
                        status_code=500)


def install(app: FastAPI) -> None:
    """Answer every error of `app` as JSON."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(core.AgentgradError, _core)
    app.add_exception_handler(Exception, _unexpected)
