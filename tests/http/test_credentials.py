"""Credentials: API keys by digest, HS256, RS256 (PEM) and ES256 (JWKS) tokens, and the
settings that configure them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm
from jwt.utils import base64url_encode
from pydantic import SecretStr

from crux.serve import Authenticator, ServeSettings, Tenant, hash_api_key
from vocabulary.errors import ConfigurationError

ISS, AUD = "https://id.example", "crux"


def _claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims: dict[str, Any] = {"tenant": "acme", "iss": ISS, "aud": AUD, "exp": now + 60}
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def _pem(key: rsa.RSAPrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def test_api_keys_are_matched_by_digest() -> None:
    auth = Authenticator(ServeSettings(api_keys={hash_api_key("k-acme"): "acme"}))
    assert auth.authenticate("Bearer k-acme") == Tenant("acme")
    assert auth.authenticate(None, "k-acme") == Tenant("acme")
    assert auth.authenticate("bearer k-acme") == Tenant("acme")
    for refused in ("Bearer k-acm", "Bearer ", "Basic k-acme", "k-acme", "Bearer " + "x" * 9000):
        assert auth.authenticate(refused) is None, refused
    assert auth.authenticate(None) is None


def test_hs256_tokens_need_signature_expiry_issuer_and_audience() -> None:
    secret = "s" * 32
    auth = Authenticator(
        ServeSettings(jwt_secret=SecretStr(secret), jwt_issuer=ISS, jwt_audience=AUD)
    )

    def token(**changes: Any) -> str:
        return "Bearer " + jwt.encode(_claims(**changes), secret, algorithm="HS256")

    assert auth.authenticate(token()) == Tenant("acme")
    assert auth.authenticate(token(exp=int(time.time()) - 60)) is None
    assert auth.authenticate(token(exp=None)) is None
    assert auth.authenticate(token(iss="https://other")) is None
    assert auth.authenticate(token(iss=None)) is None
    assert auth.authenticate(token(aud="other")) is None
    assert auth.authenticate(token(tenant="a b")) is None
    assert auth.authenticate(token(tenant=None)) is None
    forged = jwt.encode(_claims(), "another secret of at least 32 bytes", algorithm="HS256")
    assert auth.authenticate(f"Bearer {forged}") is None
    unsigned = jwt.encode(_claims(), None, algorithm="none")  # pyright: ignore[reportArgumentType]
    assert auth.authenticate(f"Bearer {unsigned}") is None
    claim = Authenticator(
        ServeSettings(
            jwt_secret=SecretStr(secret), jwt_issuer=ISS, jwt_audience=AUD, tenant_claim="org"
        )
    )
    assert claim.authenticate(token(org="globex")) == Tenant("globex")


def test_rs256_tokens_verify_against_the_public_key_and_never_as_hmac() -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = _pem(private)
    auth = Authenticator(ServeSettings(jwt_public_key=pem, jwt_issuer=ISS, jwt_audience=AUD))
    good = jwt.encode(_claims(), private, algorithm="RS256")
    assert auth.authenticate(f"Bearer {good}") == Tenant("acme")
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert auth.authenticate(f"Bearer {jwt.encode(_claims(), other, algorithm='RS256')}") is None
    # Algorithm confusion: an HS256 token "signed" with the public key text is refused.
    import hashlib
    import hmac

    header = base64url_encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = base64url_encode(json.dumps(_claims()).encode())
    signature = hmac.new(pem.encode(), header + b"." + body, hashlib.sha256).digest()
    confused = (header + b"." + body + b"." + base64url_encode(signature)).decode()
    assert auth.authenticate(f"Bearer {confused}") is None


def test_es256_tokens_pick_their_key_from_the_jwks_by_kid() -> None:
    first, second = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    keys = []
    for kid, key in (("k1", first), ("k2", second)):
        jwk = json.loads(ECAlgorithm.to_jwk(key.public_key()))
        keys.append({**jwk, "kid": kid, "alg": "ES256", "use": "sig"})
    auth = Authenticator(
        ServeSettings(jwks=json.dumps({"keys": keys}), jwt_issuer=ISS, jwt_audience=AUD)
    )

    def token(key: ec.EllipticCurvePrivateKey, kid: str) -> str:
        return "Bearer " + jwt.encode(_claims(), key, algorithm="ES256", headers={"kid": kid})

    assert auth.authenticate(token(second, "k2")) == Tenant("acme")
    assert auth.authenticate(token(first, "k1")) == Tenant("acme")
    assert auth.authenticate(token(first, "k2")) is None
    assert auth.authenticate(token(first, "k9")) is None


def test_settings_come_from_the_environment_and_refuse_what_cannot_authenticate(
    tmp_path: Path,
) -> None:
    digest = hash_api_key("k")
    settings = ServeSettings.from_env({"CRUX_API_KEYS": f"acme:{digest}", "CRUX_SERVE_PORT": "9"})
    assert settings.api_keys == {digest: "acme"} and settings.port == 9
    listed = tmp_path / "keys"
    listed.write_text(f"# tenants\nacme:{digest}\nglobex:{hash_api_key('g')}\n", encoding="utf-8")
    from_file = ServeSettings.from_env({"CRUX_API_KEYS_FILE": str(listed)})
    assert sorted(from_file.api_keys.values()) == ["acme", "globex"]
    for env, names in (
        ({}, "needs credentials"),
        ({"CRUX_API_KEYS": "acme:k"}, "no SHA-256 hex digest"),
        ({"CRUX_API_KEYS": f"a/b:{digest}"}, "entry 1 is not tenant"),
        ({"CRUX_API_KEYS": f"a:{digest},b:{digest}"}, "entry 2 is repeated"),
        ({"CRUX_JWT_SECRET": "s" * 32}, "CRUX_JWT_ISSUER and CRUX_JWT_AUDIENCE"),
        (
            {"CRUX_JWT_SECRET": "short", "CRUX_JWT_ISSUER": ISS, "CRUX_JWT_AUDIENCE": AUD},
            "at least 32 bytes",
        ),
        ({"CRUX_API_KEYS_FILE": str(tmp_path / "missing")}, "cannot read CRUX_API_KEYS_FILE"),
        ({"CRUX_API_KEYS": f"a:{digest}", "CRUX_SERVE_PORT": "http"}, "CRUX_SERVE_PORT"),
    ):
        with pytest.raises(ConfigurationError, match=names) as refused:
            ServeSettings.from_env(env)
        assert digest not in str(refused.value)
    with pytest.raises(ConfigurationError, match="PEM"):
        Authenticator(ServeSettings(jwt_public_key="nope", jwt_issuer=ISS, jwt_audience=AUD))
    with pytest.raises(ConfigurationError, match="JWKS"):
        Authenticator(ServeSettings(jwks="{}", jwt_issuer=ISS, jwt_audience=AUD))
