"""The encryption payload codec: AES-256-GCM over every payload Crux writes to Temporal.

With the codec on (`CRUX_CODEC_KEYS` or `CRUX_CODEC_KEY_FILE`), workers and clients built
by Crux (`crux.connect`, `crux worker`, `crux serve`) encrypt each payload before it reaches
the Temporal service and decrypt it after: an inline `input`, activity arguments and
results, and a reply that a client asked for in the outcome stay ciphertext in history.

The byte format, which the codecs of other SDKs implement (docs/how-to/encryption.md and
the test vectors in `schemas/codec.test-vectors.json` pin it):

- the plaintext is the original `temporal.api.common.v1.Payload`, serialized as protobuf;
- the encoded payload's metadata holds `encoding: binary/encrypted` and
  `encryption-key-id: <kid>` (both UTF-8 bytes), nothing else;
- its data is a 12-byte random nonce, then the AES-256-GCM ciphertext of the plaintext
  with its 16-byte tag appended; no associated data.

Rotation: the first key of the ring encrypts, every key of the ring decrypts, so a new key
is put first and the old one kept until no history that needs it is retained.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import re
from collections.abc import Sequence
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec

from vocabulary.errors import ConfigurationError
from vocabulary.settings import Settings

__all__ = [
    "ENCODING",
    "KEY_BYTES",
    "KEY_ID_METADATA",
    "NONCE_BYTES",
    "CodecKey",
    "EncryptionCodec",
    "codec_from_settings",
    "parse_keys",
    "with_codec",
]

ENCODING = b"binary/encrypted"
"""The `encoding` metadata of an encrypted payload."""

KEY_ID_METADATA = "encryption-key-id"
"""The metadata key naming the key that encrypted a payload."""

NONCE_BYTES = 12
"""Length of the random nonce that starts an encrypted payload's data."""

KEY_BYTES = 32
"""Length of a key: AES-256."""

_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


@dataclasses.dataclass(frozen=True, repr=False)
class CodecKey:
    """One key of the ring.

    Attributes:
        id: The key id written into each payload it encrypts (`[A-Za-z0-9._-]{1,64}`).
        secret: The 32 key bytes.
    """

    id: str
    secret: bytes

    def __repr__(self) -> str:
        # Never the key bytes: a repr ends up in logs and tracebacks.
        return f"CodecKey(id={self.id!r})"


def parse_keys(text: str, *, source: str = "CRUX_CODEC_KEYS") -> tuple[CodecKey, ...]:
    """Parse a key ring: `kid:base64key` entries, separated by commas or new lines.

    Blank entries and lines starting with `#` are skipped. The first key is the current
    one (it encrypts); the others only decrypt.

    Args:
        text: The ring.
        source: The variable or file named in errors.

    Raises:
        ConfigurationError: An entry without a valid key id, a key that is not standard
            base64 of 32 bytes, a repeated key id, or no key at all. The message names the
            entry's position and `source`, never key material.
    """
    keys: list[CodecKey] = []
    entries = [e.strip() for line in text.splitlines() for e in line.split(",")]
    for position, entry in enumerate((e for e in entries if e and not e.startswith("#")), 1):
        kid, separator, encoded = entry.partition(":")
        if not separator or not _KEY_ID.fullmatch(kid.strip()):
            raise ConfigurationError(
                f"{source}: entry {position} is not kid:base64key with a key id of letters, "
                "digits, '.', '_' or '-' (at most 64)"
            )
        try:
            secret = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            secret = b""
        if len(secret) != KEY_BYTES:
            raise ConfigurationError(
                f"{source}: the key of entry {position} is not the standard base64 of "
                f"{KEY_BYTES} bytes (e.g. `openssl rand -base64 32`)"
            )
        if any(key.id == kid.strip() for key in keys):
            raise ConfigurationError(f"{source}: key id of entry {position} is repeated")
        keys.append(CodecKey(id=kid.strip(), secret=secret))
    if not keys:
        raise ConfigurationError(f"{source} holds no key")
    return tuple(keys)


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM payload codec with key ids and rotation (the module docstring has the format).

    Args:
        keys: The ring, current key first (`parse_keys`).

    Raises:
        ConfigurationError: The ring is empty.
    """

    def __init__(self, keys: Sequence[CodecKey]) -> None:
        if not keys:
            raise ConfigurationError("the payload codec needs at least one key")
        self._current = keys[0]
        self._ciphers = {key.id: AESGCM(key.secret) for key in keys}

    @property
    def key_id(self) -> str:
        """The id of the key that encrypts."""
        return self._current.id

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of every key that decrypts, current first."""
        return tuple(self._ciphers)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Encrypt each payload with the current key (an encrypted one is left as it is)."""
        return [self.encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Decrypt each encrypted payload; others pass through unchanged.

        Raises:
            ConfigurationError: A payload names a key the ring does not hold, or fails
                authentication (another key under the same id, or altered bytes).
        """
        return [self.decrypt(payload) for payload in payloads]

    def encrypt(self, payload: Payload, *, nonce: bytes | None = None) -> Payload:
        """One payload encrypted with the current key.

        Args:
            payload: The payload to encrypt; returned unchanged when already encrypted.
            nonce: The nonce to use; random when omitted (only test vectors pass one:
                a nonce must never be used twice with one key).
        """
        if is_encrypted(payload):
            return payload
        nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
        if len(nonce) != NONCE_BYTES:
            raise ConfigurationError(f"a nonce is {NONCE_BYTES} bytes")
        sealed = self._ciphers[self._current.id].encrypt(nonce, payload.SerializeToString(), None)
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID_METADATA: self._current.id.encode()},
            data=nonce + sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        """One payload decrypted (returned unchanged when it is not encrypted).

        Raises:
            ConfigurationError: As `decode`.
        """
        if not is_encrypted(payload):
            return payload
        kid = payload.metadata.get(KEY_ID_METADATA, b"").decode("utf-8", "replace")
        cipher = self._ciphers.get(kid)
        if cipher is None:
            shown = kid if _KEY_ID.fullmatch(kid) else "(not a key id)"
            raise ConfigurationError(
                f"a payload is encrypted with key id {shown}, which the codec keys "
                "(CRUX_CODEC_KEYS or CRUX_CODEC_KEY_FILE) do not hold"
            )
        data = payload.data
        try:
            plaintext = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], None)
            return Payload.FromString(plaintext)
        except (InvalidTag, ValueError, DecodeError):
            raise ConfigurationError(
                f"a payload encrypted with key id {kid} failed authentication: another key "
                "under that id, or altered bytes"
            ) from None


def is_encrypted(payload: Payload) -> bool:
    """Whether `payload` is in the codec's encrypted form."""
    return payload.metadata.get("encoding") == ENCODING


def codec_from_settings(settings: Settings) -> EncryptionCodec | None:
    """The codec `settings` configure (`CRUX_CODEC_KEYS` or `CRUX_CODEC_KEY_FILE`), if any.

    Raises:
        ConfigurationError: Both are set, the file cannot be read, or the ring is invalid.
    """
    if settings.codec_keys is not None and settings.codec_key_file:
        raise ConfigurationError("set CRUX_CODEC_KEYS or CRUX_CODEC_KEY_FILE, not both")
    if settings.codec_keys is not None:
        return EncryptionCodec(parse_keys(settings.codec_keys.get_secret_value()))
    if settings.codec_key_file:
        try:
            text = Path(settings.codec_key_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigurationError(
                f"cannot read CRUX_CODEC_KEY_FILE: {type(error).__name__}"
            ) from None
        return EncryptionCodec(parse_keys(text, source="CRUX_CODEC_KEY_FILE"))
    return None


def with_codec(converter: DataConverter, codec: PayloadCodec | None) -> DataConverter:
    """`converter` with `codec` as its payload codec (unchanged when `codec` is `None`)."""
    if codec is None:
        return converter
    return dataclasses.replace(converter, payload_codec=codec)
