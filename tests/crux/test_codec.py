"""The encryption payload codec: the published test vectors, rotation, and key rings."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload

from crux.codec import (
    ENCODING,
    KEY_ID_METADATA,
    CodecKey,
    EncryptionCodec,
    codec_from_settings,
    parse_keys,
)
from vocabulary.errors import ConfigurationError
from vocabulary.settings import Settings

VECTORS = Path(__file__).resolve().parents[2] / "schemas" / "codec.test-vectors.json"


def _doc() -> dict[str, Any]:
    return json.loads(VECTORS.read_text(encoding="utf-8"))


def _payload(shape: dict[str, Any]) -> Payload:
    return Payload(
        metadata={k: base64.b64decode(v) for k, v in shape["metadata"].items()},
        data=base64.b64decode(shape["data"]),
    )


def _ring(doc: dict[str, Any]) -> list[CodecKey]:
    return [CodecKey(id=k["id"], secret=base64.b64decode(k["key"])) for k in doc["keys"]]


def test_the_vectors_decrypt_and_encrypt_byte_for_byte() -> None:
    doc = _doc()
    ring = _ring(doc)
    decoder = EncryptionCodec(ring)
    assert doc["keys"][0]["current"] and len(doc["vectors"]) >= 4
    for vector in doc["vectors"]:
        payload, encoded = _payload(vector["payload"]), _payload(vector["encoded"])
        assert payload.SerializeToString() == base64.b64decode(vector["plaintext"])
        assert decoder.decrypt(encoded) == payload, vector["name"]
        # Encrypting with the vector's key and nonce gives exactly the published bytes.
        [key] = [k for k in ring if k.id == vector["key_id"]]
        nonce = base64.b64decode(vector["nonce"])
        assert EncryptionCodec([key]).encrypt(payload, nonce=nonce) == encoded, vector["name"]
        assert encoded.metadata["encoding"] == ENCODING
        assert encoded.metadata[KEY_ID_METADATA] == vector["key_id"].encode()
        assert encoded.data[:12] == nonce


def test_the_invalid_vectors_are_refused_without_key_material() -> None:
    doc = _doc()
    decoder = EncryptionCodec(_ring(doc))
    assert {v["reason"] for v in doc["invalid"]} == {"authentication", "unknown-key"}
    for vector in doc["invalid"]:
        with pytest.raises(ConfigurationError) as refused:
            decoder.decrypt(_payload(vector["encoded"]))
        message = str(refused.value)
        assert ("CRUX_CODEC_KEYS" in message) == (vector["reason"] == "unknown-key"), message
        for key in doc["keys"]:
            assert key["key"] not in message


async def test_the_current_key_encrypts_and_every_key_decrypts() -> None:
    old = CodecKey(id="old", secret=b"\x01" * 32)
    new = CodecKey(id="new", secret=b"\x02" * 32)
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"hello"')
    [before] = await EncryptionCodec([old]).encode([plain])
    rotated = EncryptionCodec([new, old])
    [after] = await rotated.encode([plain])
    assert before.metadata[KEY_ID_METADATA] == b"old"
    assert after.metadata[KEY_ID_METADATA] == b"new"
    assert await rotated.decode([before, after, plain]) == [plain, plain, plain]
    # A random nonce each time: the same payload never encrypts to the same bytes.
    [again] = await rotated.encode([plain])
    assert again.data != after.data
    # Encoding is idempotent: ciphertext is not encrypted twice.
    assert await rotated.encode([after]) == [after]
    with pytest.raises(ConfigurationError, match="key id new"):
        EncryptionCodec([old]).decrypt(after)


def test_a_key_ring_is_parsed_from_entries_and_lines() -> None:
    key = base64.b64encode(b"k" * 32).decode()
    other = base64.b64encode(b"o" * 32).decode()
    ring = parse_keys(f" a-1:{key} ,\n# retired below\nb.2:{other}\n")
    assert [k.id for k in ring] == ["a-1", "b.2"]
    assert ring[0].secret == b"k" * 32
    assert "k" * 8 not in repr(ring)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("", "holds no key"),
        ("nokey", "entry 1 is not kid:base64key"),
        ("bad id:" + base64.b64encode(b"k" * 32).decode(), "entry 1 is not kid:base64key"),
        ("a:" + base64.b64encode(b"short").decode(), "entry 1 is not the standard base64"),
        ("a:not base64!", "entry 1 is not the standard base64"),
        ("a:{k},a:{k}".format(k=base64.b64encode(b"k" * 32).decode()), "entry 2 is repeated"),
    ],
)
def test_an_invalid_key_ring_is_refused_naming_the_entry(text: str, names: str) -> None:
    with pytest.raises(ConfigurationError, match=names) as refused:
        parse_keys(text)
    assert "CRUX_CODEC_KEYS" in str(refused.value)
    assert "k" * 8 not in str(refused.value)


def test_settings_turn_the_codec_on_from_a_variable_or_a_file(tmp_path: Path) -> None:
    key = base64.b64encode(b"k" * 32).decode()
    assert codec_from_settings(Settings.from_env({})) is None
    codec = codec_from_settings(Settings.from_env({"CRUX_CODEC_KEYS": f"main:{key}"}))
    assert codec is not None and codec.key_id == "main"
    ring = tmp_path / "keys"
    ring.write_text(f"# current first\nnext:{key}\nmain:{key}\n", encoding="utf-8")
    codec = codec_from_settings(Settings.from_env({"CRUX_CODEC_KEY_FILE": str(ring)}))
    assert codec is not None and codec.key_ids == ("next", "main")
    with pytest.raises(ConfigurationError, match="not both"):
        codec_from_settings(
            Settings.from_env({"CRUX_CODEC_KEYS": f"main:{key}", "CRUX_CODEC_KEY_FILE": str(ring)})
        )
    with pytest.raises(ConfigurationError, match="CRUX_CODEC_KEY_FILE"):
        codec_from_settings(Settings.from_env({"CRUX_CODEC_KEY_FILE": str(tmp_path / "none")}))
    # The key never shows in the settings' repr.
    assert key not in repr(Settings.from_env({"CRUX_CODEC_KEYS": f"main:{key}"}))
