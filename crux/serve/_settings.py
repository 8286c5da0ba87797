"""What `crux serve` is configured with beyond the common settings: who may call it.

Built once from the environment (`ServeSettings.from_env`), like `Settings`. Credentials are
never stored in clear: API keys are configured as SHA-256 digests mapped to tenants, JWT
keys as a shared secret (HS256) or public keys (RS256/ES256, a PEM file or a JWKS file).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from vocabulary.errors import ConfigurationError

TENANT_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a tenant id may be: it becomes part of every Thread and generation id it owns."""

DEFAULT_TENANT_CLAIM = "tenant"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

_DIGEST = re.compile(r"[0-9a-f]{64}")

SERVE_ENVIRONMENT = {
    "CRUX_API_KEYS": "API keys as tenant:sha256-hex-digest entries, comma-separated",
    "CRUX_API_KEYS_FILE": "a file of tenant:sha256-hex-digest lines instead",
    "CRUX_JWT_SECRET": "shared secret of HS256 bearer tokens",
    "CRUX_JWT_PUBLIC_KEY_FILE": "PEM public key of RS256/ES256 bearer tokens",
    "CRUX_JWT_JWKS_FILE": "JWKS file of RS256/ES256 bearer tokens (keys picked by kid)",
    "CRUX_JWT_ISSUER": "the iss every bearer token must carry (required with JWT)",
    "CRUX_JWT_AUDIENCE": "the aud every bearer token must carry (required with JWT)",
    "CRUX_JWT_TENANT_CLAIM": "the claim naming a token's tenant (default: tenant)",
    "CRUX_CORS_ORIGINS": "origins allowed to call the codec server (the Temporal UI's)",
    "CRUX_SERVE_HOST": "address to listen on (default: 127.0.0.1)",
    "CRUX_SERVE_PORT": "port to listen on (default: 8000)",
}
"""Every variable `crux serve` reads besides the common ones, with its meaning."""


def hash_api_key(key: str) -> str:
    """The digest under which an API key is configured (SHA-256, lowercase hex)."""
    return hashlib.sha256(key.encode()).hexdigest()


class ServeSettings(BaseModel):
    """Who may call `crux serve`, and where it listens.

    Attributes:
        api_keys: SHA-256 hex digest of each API key -> its tenant (`CRUX_API_KEYS`,
            `CRUX_API_KEYS_FILE`).
        jwt_secret: Shared secret of HS256 bearer tokens (`CRUX_JWT_SECRET`).
        jwt_public_key: PEM public key of RS256/ES256 tokens (read from
            `CRUX_JWT_PUBLIC_KEY_FILE`).
        jwks: A JWKS document of RS256/ES256 keys, picked by the token's `kid` (read from
            `CRUX_JWT_JWKS_FILE`).
        jwt_issuer: The `iss` every token must carry (`CRUX_JWT_ISSUER`).
        jwt_audience: The `aud` every token must carry (`CRUX_JWT_AUDIENCE`).
        tenant_claim: The claim that names a token's tenant (`CRUX_JWT_TENANT_CLAIM`).
        cors_origins: Origins a browser may call the codec server from, the Temporal UI's
            (`CRUX_CORS_ORIGINS`, comma-separated); none when empty.
        host: Address to listen on (`CRUX_SERVE_HOST`).
        port: Port to listen on (`CRUX_SERVE_PORT`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    api_keys: dict[str, str] = Field(default_factory=dict[str, str])
    jwt_secret: SecretStr | None = None
    jwt_public_key: str | None = None
    jwks: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    tenant_claim: str = DEFAULT_TENANT_CLAIM
    cors_origins: tuple[str, ...] = ()
    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)

    @property
    def uses_jwt(self) -> bool:
        """Whether bearer tokens are verified as JWTs."""
        return bool(self.jwt_secret or self.jwt_public_key or self.jwks)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ServeSettings:
        """Read the settings from an environment mapping (pass `os.environ` in programs).

        Raises:
            ConfigurationError: A variable is malformed, a file cannot be read, JWT keys are
                set without `CRUX_JWT_ISSUER` and `CRUX_JWT_AUDIENCE`, or no credential is
                configured at all (the API never runs unauthenticated).
        """

        def value(name: str) -> str | None:
            raw = env.get(name, "").strip()
            return raw or None

        keys: dict[str, str] = {}
        if (inline := value("CRUX_API_KEYS")) is not None:
            keys |= parse_api_keys(inline, source="CRUX_API_KEYS")
        if (key_file := value("CRUX_API_KEYS_FILE")) is not None:
            keys |= parse_api_keys(
                _read(key_file, "CRUX_API_KEYS_FILE"), source="CRUX_API_KEYS_FILE"
            )
        public_key_file = value("CRUX_JWT_PUBLIC_KEY_FILE")
        jwks_file = value("CRUX_JWT_JWKS_FILE")
        secret = value("CRUX_JWT_SECRET")
        port = value("CRUX_SERVE_PORT")
        if port is not None and not port.isdigit():
            raise ConfigurationError("CRUX_SERVE_PORT must be a port number")
        claim = value("CRUX_JWT_TENANT_CLAIM") or DEFAULT_TENANT_CLAIM
        settings = cls(
            api_keys=keys,
            jwt_secret=SecretStr(secret) if secret else None,
            jwt_public_key=(
                _read(public_key_file, "CRUX_JWT_PUBLIC_KEY_FILE") if public_key_file else None
            ),
            jwks=_read(jwks_file, "CRUX_JWT_JWKS_FILE") if jwks_file else None,
            jwt_issuer=value("CRUX_JWT_ISSUER"),
            jwt_audience=value("CRUX_JWT_AUDIENCE"),
            tenant_claim=claim,
            cors_origins=tuple(
                origin.strip()
                for origin in (value("CRUX_CORS_ORIGINS") or "").split(",")
                if origin.strip()
            ),
            host=value("CRUX_SERVE_HOST") or DEFAULT_HOST,
            port=int(port) if port is not None else DEFAULT_PORT,
        )
        settings.check()
        return settings

    def check(self) -> None:
        """Refuse settings under which the API could not authenticate anyone properly.

        Raises:
            ConfigurationError: No credential configured, a JWT secret under 32 bytes, or
                JWT without issuer and audience.
        """
        if not self.api_keys and not self.uses_jwt:
            raise ConfigurationError(
                "crux serve needs credentials: set CRUX_API_KEYS (or CRUX_API_KEYS_FILE) "
                "and/or CRUX_JWT_SECRET, CRUX_JWT_PUBLIC_KEY_FILE or CRUX_JWT_JWKS_FILE"
            )
        if self.jwt_secret is not None and len(self.jwt_secret.get_secret_value().encode()) < 32:
            # RFC 7518: an HS256 key shorter than the hash output weakens the signature.
            raise ConfigurationError("CRUX_JWT_SECRET must be at least 32 bytes")
        if self.uses_jwt and not (self.jwt_issuer and self.jwt_audience):
            raise ConfigurationError(
                "bearer tokens are checked against an issuer and an audience: set "
                "CRUX_JWT_ISSUER and CRUX_JWT_AUDIENCE"
            )


def parse_api_keys(text: str, *, source: str) -> dict[str, str]:
    """Parse `tenant:sha256hex` entries (commas or new lines; `#` starts a comment line).

    Raises:
        ConfigurationError: An entry with an invalid tenant id or digest, or a digest listed
            twice; the message names the entry's position and `source`, never the digest.
    """
    keys: dict[str, str] = {}
    entries = [e.strip() for line in text.splitlines() for e in line.split(",")]
    for position, entry in enumerate((e for e in entries if e and not e.startswith("#")), 1):
        tenant, separator, digest = (part.strip() for part in entry.partition(":"))
        if not separator or not TENANT_PATTERN.fullmatch(tenant):
            raise ConfigurationError(
                f"{source}: entry {position} is not tenant:sha256-hex with a tenant of "
                "letters, digits, '_' or '-' (at most 64)"
            )
        digest = digest.lower()
        if not _DIGEST.fullmatch(digest):
            raise ConfigurationError(
                f"{source}: entry {position} holds no SHA-256 hex digest (configure the "
                "digest of a key, never the key: crux serve --new-key <tenant>)"
            )
        if digest in keys:
            raise ConfigurationError(f"{source}: the digest of entry {position} is repeated")
        keys[digest] = tenant
    return keys


def _read(path: str, variable: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(f"cannot read {variable}: {type(error).__name__}") from None
