"""What every API route shares: the documented error responses."""

from __future__ import annotations

from typing import Any

from agentgrad.service.models import ErrorBody

_ERRORS = {400: "The body cannot be parsed.", 401: "No valid token.", 403: "The token lacks the scope.",
           404: "No such run, artifact or diff.",
           409: "The request conflicts with the run's state.", 422: "The request is not valid.",
           429: "The token has as many active jobs as it may.", 500: "An unexpected error (no traceback)."}
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody, "description": text}
                                          for code, text in _ERRORS.items()}
