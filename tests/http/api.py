"""An HTTP API server for tests: the real app under a real uvicorn on a loopback port.

`serving(...)` runs `crux.serve.create_app` in this process's event loop (so the test's
PostgreSQL pool, Temporal client and worker are the server's), on a free port, and stops it
afterwards; the tests talk to it over real HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import time
import uuid
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import jwt
import uvicorn

from crux.codec import EncryptionCodec, parse_keys
from crux.runtime import Runtime
from crux.serve import ServeSettings, create_app, hash_api_key
from vocabulary.settings import Settings

ISSUER = "https://issuer.crux.test"
AUDIENCE = "crux-api"
TENANTS = ("acme", "globex")


@dataclass
class Credentials:
    """API keys per tenant and the HS256 secret of the server under test."""

    keys: dict[str, str] = field(
        default_factory=lambda: {t: f"crux_{secrets.token_urlsafe(24)}" for t in TENANTS}
    )
    jwt_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def settings(self, **changes: object) -> ServeSettings:
        values: dict[str, object] = {
            "api_keys": {hash_api_key(key): tenant for tenant, key in self.keys.items()},
            "jwt_secret": self.jwt_secret,
            "jwt_issuer": ISSUER,
            "jwt_audience": AUDIENCE,
            "cors_origins": ("http://ui.crux.test:8080",),
        }
        values.update(changes)
        return ServeSettings.model_validate(values)

    def headers(self, tenant: str) -> dict[str, str]:
        """An API key's `Authorization` header."""
        return {"Authorization": f"Bearer {self.keys[tenant]}"}

    def token(
        self,
        tenant: str,
        *,
        expires_in: float = 300,
        issuer: str = ISSUER,
        audience: str = AUDIENCE,
    ) -> str:
        """An HS256 JWT for `tenant`."""
        now = int(time.time())
        claims = {"sub": f"user-{tenant}", "tenant": tenant, "iss": issuer, "aud": audience,
                  "iat": now, "exp": now + int(expires_in)}  # fmt: skip
        return jwt.encode(claims, self.jwt_secret, algorithm="HS256")


def test_codec() -> EncryptionCodec:
    """A codec with a fresh random key."""
    key = base64.b64encode(secrets.token_bytes(32)).decode()
    return EncryptionCodec(parse_keys(f"test-{uuid.uuid4().hex[:6]}:{key}"))


test_codec.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@asynccontextmanager
async def serving(
    runtime: Runtime,
    credentials: Credentials,
    *,
    codec: EncryptionCodec | None = None,
    settings: Settings | None = None,
) -> AsyncGenerator[str]:
    """Run the API for `runtime` on a free loopback port; yield its base URL."""
    app = create_app(settings or Settings(), credentials.settings(), runtime=runtime, codec=codec)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    # Signals stay with pytest: the test stops the server itself.
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    task = asyncio.ensure_future(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise AssertionError("the API server did not start")
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=30)


def client(base_url: str, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    """An HTTP client of the API (no proxies from the environment)."""
    return httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60, trust_env=False)
