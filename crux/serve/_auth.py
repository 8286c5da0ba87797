"""Who is calling: an API key or a JWT bearer token, mapped to a tenant.

Every request but the health probes carries `Authorization: Bearer <credential>` (or
`X-API-Key: <key>`). A credential with the shape of a JWT is verified as one when JWT keys
are configured (signature, `exp`, `iss` and `aud` required and checked; the tenant from the
configured claim); anything else is looked up as an API key by its SHA-256 digest. A
request whose credential is missing, malformed, expired or unknown is refused alike.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from crux.serve._settings import TENANT_PATTERN, ServeSettings, hash_api_key
from vocabulary.errors import ConfigurationError

LEEWAY_SECONDS = 10
"""Clock skew tolerated on `exp`, `nbf` and `iat` between the issuer and this server."""

_ASYMMETRIC = ("RS256", "ES256")
_REQUIRED_CLAIMS = ["exp", "iss", "aud"]


@dataclass(frozen=True)
class Tenant:
    """The authenticated caller's tenant.

    Attributes:
        id: The tenant id (`[A-Za-z0-9_-]{1,64}`).
    """

    id: str


class Authenticator:
    """Verifies credentials against the configured API keys and JWT keys.

    Args:
        settings: The credentials `crux serve` accepts.

    Raises:
        ConfigurationError: The PEM public key or the JWKS document cannot be parsed.
    """

    def __init__(self, settings: ServeSettings) -> None:
        self._settings = settings
        self._api_keys = dict(settings.api_keys)
        self._secret = settings.jwt_secret.get_secret_value() if settings.jwt_secret else None
        self._public_key: Any = None
        if settings.jwt_public_key:
            try:
                self._public_key = load_pem_public_key(settings.jwt_public_key.encode())
            except (ValueError, TypeError):
                raise ConfigurationError(
                    "CRUX_JWT_PUBLIC_KEY_FILE holds no PEM public key"
                ) from None
        self._jwks: jwt.PyJWKSet | None = None
        if settings.jwks:
            try:
                self._jwks = jwt.PyJWKSet.from_json(settings.jwks)
            except (jwt.PyJWTError, ValueError, TypeError):
                raise ConfigurationError("CRUX_JWT_JWKS_FILE holds no usable JWKS") from None

    def authenticate(self, authorization: str | None, api_key: str | None = None) -> Tenant | None:
        """The tenant of the request's credential, or `None` when it has no valid one.

        Args:
            authorization: The `Authorization` header (`Bearer <credential>`).
            api_key: The `X-API-Key` header.
        """
        credential = api_key
        if credential is None and authorization is not None:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer":
                return None
            credential = value.strip()
        if not credential or len(credential) > 8192:
            return None
        if self._settings.uses_jwt and credential.count(".") == 2:
            return self._jwt_tenant(credential)
        return self._api_key_tenant(credential)

    def _api_key_tenant(self, key: str) -> Tenant | None:
        digest = hash_api_key(key)
        tenant: str | None = None
        # Every digest is compared, in constant time each, whether or not one matched.
        for known, owner in self._api_keys.items():
            if hmac.compare_digest(known, digest):
                tenant = owner
        return Tenant(tenant) if tenant is not None else None

    def _jwt_tenant(self, token: str) -> Tenant | None:
        try:
            header = jwt.get_unverified_header(token)
            algorithm = header.get("alg")
            key = self._key_for(algorithm, header.get("kid"))
            if key is None or not isinstance(algorithm, str):
                return None
            claims = jwt.decode(
                token,
                key,
                # One algorithm, chosen by the key configured for it: a token cannot pick
                # another (an HS256 token never verifies against a public key).
                algorithms=[algorithm],
                issuer=self._settings.jwt_issuer,
                audience=self._settings.jwt_audience,
                leeway=LEEWAY_SECONDS,
                options={"require": _REQUIRED_CLAIMS},
            )
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            return None
        tenant = claims.get(self._settings.tenant_claim)
        if not isinstance(tenant, str) or not TENANT_PATTERN.fullmatch(tenant):
            return None
        return Tenant(tenant)

    def _key_for(self, algorithm: object, kid: object) -> Any:
        if algorithm == "HS256":
            return self._secret
        if algorithm not in _ASYMMETRIC:
            return None
        if self._jwks is not None and isinstance(kid, str):
            for candidate in self._jwks.keys:
                if candidate.key_id == kid:
                    return candidate.key
            return None
        return self._public_key
