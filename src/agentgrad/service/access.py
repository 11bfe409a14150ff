"""Who may call: the request's bearer token (or, for the dashboard, the same token in a cookie) checked against
the `TokenBook`, and the scope an endpoint needs.

A request authenticated by the cookie that changes something must also carry the ``X-Agentgrad-CSRF`` header
(the dashboard's scripts send it; a form on another site cannot). With `Settings.local_only` every request is the
local user, with both scopes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from agentgrad.service.auth import READ, WRITE, Principal
from agentgrad.service.context import Service, service_of
from agentgrad.service.errors import ApiError

COOKIE = "agentgrad_token"
CSRF_HEADER = "x-agentgrad-csrf"
_SAFE = ("GET", "HEAD", "OPTIONS")
bearer = HTTPBearer(auto_error=False, description="A token from the service's tokens file or environment.")


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, {"WWW-Authenticate": "Bearer"})


def identify(request: Request, service: Service, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    """The caller of `request` (`ApiError` 401 without a valid token, 403 for a cookie write without the header)."""
    if service.settings.local_only:
        return Principal("local", frozenset({READ, WRITE}), service.settings.max_jobs)
    token = credentials.credentials if credentials is not None else request.cookies.get(COOKIE)
    if not token:
        raise _unauthorized("this endpoint needs a token: send 'Authorization: Bearer <token>'")
    principal = service.tokens.check(token)
    if principal is None:
        raise _unauthorized("the token is not valid")
    if credentials is None and request.method not in _SAFE and request.headers.get(CSRF_HEADER) != "1":
        raise ApiError(403, "forbidden", f"a change made with the dashboard's cookie needs the {CSRF_HEADER} header")
    return principal


def caller(request: Request, service: Annotated[Service, Depends(service_of)],
           credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Principal:
    """The authenticated caller (any scope)."""
    return identify(request, service, credentials)


def _needs(principal: Principal, scope: str) -> Principal:
    if not principal.can(scope):
        raise ApiError(403, "forbidden", f"the token {principal.name!r} lacks the {scope!r} scope")
    return principal


def reader(principal: Annotated[Principal, Depends(caller)]) -> Principal:
    """A caller with the read scope."""
    return _needs(principal, READ)


def writer(principal: Annotated[Principal, Depends(caller)]) -> Principal:
    """A caller with the write scope."""
    return _needs(principal, WRITE)


Reader = Annotated[Principal, Depends(reader)]
Writer = Annotated[Principal, Depends(writer)]
ServiceDep = Annotated[Service, Depends(service_of)]
