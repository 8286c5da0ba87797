"""What every route depends on: the shared services, and the caller's tenant scope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from crux.codec import EncryptionCodec
from crux.runtime import Runtime
from crux.serve._auth import Authenticator
from crux.serve._tenancy import TenantScope
from storage import GenerationStore, ThreadStore


@dataclass(frozen=True)
class Services:
    """The process-wide clients a route uses; nothing here holds per-request state.

    Attributes:
        runtime: The facade (Temporal client and PostgreSQL pool).
        threads: The Thread store on the runtime's pool.
        generations: Staging, ledger and receipts on the runtime's pool.
        authenticator: Verifies credentials.
        codec: The payload codec, when the codec server is on.
    """

    runtime: Runtime
    threads: ThreadStore
    generations: GenerationStore
    authenticator: Authenticator
    codec: EncryptionCodec | None


class Unauthenticated(Exception):
    """The request carries no valid credential (answered 401)."""


# `auto_error=False`: a missing credential is answered by our own 401, with our body.
_bearer = HTTPBearer(auto_error=False, description="An API key or a JWT")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key")


def services(request: Request) -> Services:
    """The services the app was started with."""
    found: Services = request.app.state.services
    return found


def tenant_scope(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> TenantScope:
    """The caller's tenant scope.

    Raises:
        Unauthenticated: No valid API key or bearer token.
    """
    authorization = f"Bearer {bearer.credentials}" if bearer is not None else None
    tenant = services(request).authenticator.authenticate(authorization, api_key)
    if tenant is None:
        raise Unauthenticated
    # For the access log: who called, never what they sent.
    request.state.tenant = tenant.id
    return TenantScope(tenant)


Scope = Annotated[TenantScope, Depends(tenant_scope)]
"""The caller's tenant scope, as a route parameter."""

Shared = Annotated[Services, Depends(services)]
"""The shared services, as a route parameter."""
