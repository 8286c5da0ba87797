"""`/codec/encode` and `/codec/decode`: the codec server the Temporal UI and CLI call.

Temporal's codec server protocol: a POST of `{"payloads": [...]}` (payloads in protobuf
JSON, metadata values and data base64) answered in the same shape. Authenticated like every
route; browsers call it from the Temporal UI's origin (`CRUX_CORS_ORIGINS`). It decrypts
whatever ciphertext it is given, so grant its credentials to those who may read the
namespace's histories.
"""

from __future__ import annotations

import base64
import binascii

from fastapi import APIRouter
from temporalio.api.common.v1 import Payload

from crux.codec import EncryptionCodec
from crux.serve._deps import Scope, Shared
from crux.serve._errors import ERROR_RESPONSES, NotFoundError
from crux.serve._models import CodecPayload, CodecPayloads
from vocabulary.errors import ConfigurationError

router = APIRouter(prefix="/codec", tags=["codec"], responses=ERROR_RESPONSES)


def _decoded(body: CodecPayloads) -> list[Payload]:
    try:
        return [
            Payload(
                metadata={k: base64.b64decode(v, validate=True) for k, v in p.metadata.items()},
                data=base64.b64decode(p.data, validate=True),
            )
            for p in body.payloads
        ]
    except (binascii.Error, ValueError):
        raise ConfigurationError("payload metadata values and data must be base64") from None


def _encoded(payloads: list[Payload]) -> CodecPayloads:
    return CodecPayloads(
        payloads=[
            CodecPayload(
                metadata={k: base64.b64encode(v).decode() for k, v in p.metadata.items()},
                data=base64.b64encode(p.data).decode(),
            )
            for p in payloads
        ]
    )


def _codec(codec: EncryptionCodec | None) -> EncryptionCodec:
    if codec is None:
        raise NotFoundError
    return codec


@router.post("/encode", summary="Encrypt payloads (Temporal codec server)")
async def encode(body: CodecPayloads, scope: Scope, shared: Shared) -> CodecPayloads:
    """Each payload encrypted with the current key (already encrypted ones unchanged)."""
    del scope  # authenticated; payloads belong to no tenant
    return _encoded(await _codec(shared.codec).encode(_decoded(body)))


@router.post("/decode", summary="Decrypt payloads (Temporal codec server)")
async def decode(body: CodecPayloads, scope: Scope, shared: Shared) -> CodecPayloads:
    """Each encrypted payload decrypted (others unchanged)."""
    del scope
    return _encoded(await _codec(shared.codec).decode(_decoded(body)))
