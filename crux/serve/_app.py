"""The ASGI application of `crux serve`: routes, error handlers, access log, lifespan.

Stateless: everything a request needs is in PostgreSQL or Temporal, so any number of
replicas serve behind a load balancer, and any replica resumes any event stream.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crux.codec import EncryptionCodec, codec_from_settings
from crux.connect import connect
from crux.runtime import Runtime
from crux.serve import _codec_server, _generations, _health, _receipts, _threads
from crux.serve._auth import Authenticator
from crux.serve._deps import Services, Unauthenticated
from crux.serve._errors import (
    NOT_FOUND,
    UNAUTHENTICATED,
    crux_error,
    error_response,
    invalid_request,
    not_found,
)
from crux.serve._errors import NotFoundError as RouteNotFound
from crux.serve._models import ErrorInfo
from crux.serve._settings import ServeSettings
from storage import GenerationStore, ThreadStore
from telemetry.logs import get_logger
from vocabulary.errors import CruxError
from vocabulary.settings import Settings

_log = get_logger("crux.serve.access")

DESCRIPTION = """\
Threads, generations, receipts and the payload codec of a Crux deployment, per tenant.

Authenticate with `Authorization: Bearer <API key or JWT>` (or `X-API-Key`). Every id is the
caller's own: a tenant reads and writes only its own Threads, generations and receipts, and
anything else answers 404 like something that does not exist. Message text never enters
Temporal history: generations run from text staged in PostgreSQL.
"""


def _version() -> str:
    try:
        return metadata.version("crux-temporal")
    except metadata.PackageNotFoundError:
        return "0"


class AccessLog:
    """Logs one content-free line per request: method, route, status, tenant, duration.

    The route is the template (`/v1/threads/{thread_id}`), never the path with its ids or
    the query; bodies are never read. An exception escaping a route becomes a 500 with a
    content-free body, logged by its type only (its message could quote a value).
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.monotonic()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        error: str | None = None
        try:
            await self._app(scope, receive, sending)
        except Exception as raised:  # answered here, logged by type: never its message
            error = type(raised).__name__
            if status == 0:
                response = error_response(
                    500, ErrorInfo(type="InternalError", code="failed", message="request failed")
                )
                await response(scope, receive, sending)
        finally:
            route: Any = scope.get("route")
            state: dict[str, Any] = scope.get("state") or {}
            _log.info(
                "http.request",
                method=scope.get("method"),
                route=getattr(route, "path", None) or "unmatched",
                status=status,
                tenant=state.get("tenant"),
                duration_ms=round((time.monotonic() - started) * 1000, 1),
                **({"error": error} if error else {}),
            )


async def _unauthenticated(_request: Request, _error: Exception) -> JSONResponse:
    return error_response(401, UNAUTHENTICATED, headers={"WWW-Authenticate": "Bearer"})


async def _http_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        return error_response(404, NOT_FOUND)
    info = ErrorInfo(type="HTTPError", code=str(error.status_code), message=str(error.detail))
    return error_response(
        error.status_code, info, headers=dict(error.headers) if error.headers else None
    )


def create_app(
    settings: Settings,
    serve: ServeSettings,
    *,
    runtime: Runtime | None = None,
    codec: EncryptionCodec | None = None,
) -> FastAPI:
    """The HTTP API (and the codec server when codec keys are configured).

    Args:
        settings: The common settings: Temporal, PostgreSQL, task queue, codec keys.
        serve: Who may call, and the codec server's CORS origins.
        runtime: A runtime to serve with (its pool and client are the caller's to close);
            one is connected from `settings` when the app starts otherwise.
        codec: The codec server's codec; the one `settings` configure when omitted.

    Raises:
        ConfigurationError: Invalid credentials configuration or codec keys.
    """
    serve.check()
    authenticator = Authenticator(serve)
    codec = codec or codec_from_settings(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncGenerator[None]:
        served = runtime or await connect(settings=settings)
        app.state.services = Services(
            runtime=served,
            threads=ThreadStore(served.pool),
            generations=GenerationStore(served.pool),
            authenticator=authenticator,
            codec=codec,
        )
        try:
            yield
        finally:
            if runtime is None:
                await served.close()

    app = FastAPI(
        title="Crux HTTP API",
        version=_version(),
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
    )
    app.include_router(_health.router)
    app.include_router(_threads.router)
    app.include_router(_generations.router)
    app.include_router(_receipts.router)
    if codec is not None:
        app.include_router(_codec_server.router)
    app.add_exception_handler(CruxError, crux_error)
    app.add_exception_handler(RouteNotFound, not_found)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(Unauthenticated, _unauthenticated)
    app.add_exception_handler(HTTPException, _http_error)
    if serve.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(serve.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "X-API-Key", "X-Namespace"],
            allow_credentials=True,
        )
    app.add_middleware(AccessLog)
    return app
