"""Embedding clients: an OpenAI-compatible `/embeddings` endpoint and the offline embedding.

The response cache embeds a rendered user turn to find similar earlier turns. Both clients
return unit-length vectors (a server that does not normalise is normalised here), so a dot
product is the cosine similarity. No retries happen here: Temporal's retry policy of the
activity that calls them is the only loop, and failures are the classified
`ProviderError`s of `providers/_errors.py`.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

import httpx

from providers._errors import malformed
from providers._http import join_url, post_json
from providers._json import as_list, as_object
from providers.openai import DEFAULT_OPENAI_BASE_URL
from vocabulary.errors import ConfigurationError

OFFLINE_EMBEDDING_MODEL = "ngram-256"
"""The offline embedding's model name; `offline:ngram-256` as a model id."""
OFFLINE_EMBEDDING_DIMENSIONS = 256
"""Dimensions of the offline embedding."""
MAX_EMBEDDING_DIMENSIONS = 16_000
"""Longest vector accepted from a server (pgvector stores at most 16,000)."""

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Embeddings:
    """Unit-length vectors, one per input text, in input order.

    Attributes:
        vectors: The vectors.
        input_tokens: Tokens the server reports it read (0 when it reports none).
    """

    vectors: tuple[tuple[float, ...], ...]
    input_tokens: int = 0

    @property
    def dimensions(self) -> int:
        """The vectors' length (0 without vectors)."""
        return len(self.vectors[0]) if self.vectors else 0


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Anything that embeds texts for a model name."""

    async def embed(self, model: str, texts: Sequence[str]) -> Embeddings:
        """Embed `texts` with `model` (the provider's own model name)."""
        ...


def normalised(vector: Sequence[float]) -> tuple[float, ...]:
    """`vector` scaled to unit length (a zero vector stays zero)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0 or not math.isfinite(norm):
        return tuple(0.0 for _ in vector)
    return tuple(x / norm for x in vector)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The dot product of two unit vectors (their cosine similarity)."""
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def _features(text: str) -> dict[str, float]:
    """Words (weight 1) and character trigrams of each padded word (weight 0.5)."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    weights: dict[str, float] = {}
    for word in words:
        weights[f"w:{word}"] = weights.get(f"w:{word}", 0.0) + 1.0
        padded = f" {word} "
        for start in range(len(padded) - 2):
            gram = f"c:{padded[start : start + 3]}"
            weights[gram] = weights.get(gram, 0.0) + 0.5
    return weights


def ngram_embedding(text: str, dimensions: int = OFFLINE_EMBEDDING_DIMENSIONS) -> tuple[float, ...]:
    """A deterministic, lexical embedding: hashed words and character trigrams.

    Case, punctuation and spacing do not count, so `What is the capital of France?` and
    `what is the capital of france` embed identically, and texts sharing most words and
    spellings land close together. It captures wording, not meaning: a paraphrase with
    other words is far away. Each feature is hashed (BLAKE2b) to a dimension and a sign;
    the sum is scaled to unit length.
    """
    vector = [0.0] * dimensions
    for feature, weight in _features(text).items():
        digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        value = int.from_bytes(digest, "big")
        vector[value % dimensions] += weight if value >> 63 else -weight
    return normalised(vector)


class OfflineEmbeddingProvider:
    """`offline:ngram-256`: `ngram_embedding` in process, no network."""

    async def embed(self, model: str, texts: Sequence[str]) -> Embeddings:
        """Embed `texts`; `model` must be `ngram-256`.

        Raises:
            ConfigurationError: Another model name.
        """
        if model != OFFLINE_EMBEDDING_MODEL:
            raise ConfigurationError(
                f"the offline embedding model is offline:{OFFLINE_EMBEDDING_MODEL}"
            )
        return Embeddings(vectors=tuple(ngram_embedding(text) for text in texts))


class OpenAIEmbeddingProvider:
    """`EmbeddingProvider` over `POST {base_url}/embeddings` (OpenAI, vLLM, Ollama, ...).

    Args:
        http: The HTTP client to use (its timeouts apply; it is not closed here).
        base_url: API root including the version, e.g. `http://127.0.0.1:8000/v1`.
        api_key: Sent as a bearer token when given.
        headers: Extra headers sent with every call.
        provider: The provider label used in errors (`openai` unless configured).
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str = DEFAULT_OPENAI_BASE_URL,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        provider: str = "openai",
    ) -> None:
        self._http = http
        self.base_url = base_url
        self.provider = provider
        self._headers = {
            "content-type": "application/json",
            "accept": "application/json",
            **(headers or {}),
        }
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"

    def encode(self, model: str, texts: Sequence[str]) -> dict[str, Any]:
        """The JSON body sent for `texts`."""
        return {"model": model, "input": list(texts), "encoding_format": "float"}

    async def embed(self, model: str, texts: Sequence[str]) -> Embeddings:
        """Embed `texts` in one request.

        Raises:
            ProviderError: Classified failure; `ProviderResponseError` when the body is
                not one finite vector per input, all of one length.
        """
        url = join_url(self.base_url, "embeddings")
        data = await post_json(
            self._http, self.provider, url, self.encode(model, texts), self._headers
        )
        return _decode(self.provider, data, len(texts))


def _decode(provider: str, data: dict[str, Any], expected: int) -> Embeddings:
    items = as_list(data.get("data"))
    if items is None or len(items) != expected:
        raise malformed(provider, "embeddings do not match the inputs")
    vectors: list[tuple[float, ...] | None] = [None] * expected
    for position, raw in enumerate(items):
        item = as_object(raw) or {}
        index = item.get("index", position)
        values = as_list(item.get("embedding"))
        if (
            not isinstance(index, int)
            or isinstance(index, bool)
            or not 0 <= index < expected
            or vectors[index] is not None
            or not values
            or len(values) > MAX_EMBEDDING_DIMENSIONS
        ):
            raise malformed(provider, "an embedding is missing or out of place")
        if not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            for x in values
        ):
            raise malformed(provider, "an embedding holds a value that is not a finite number")
        vectors[index] = normalised([float(x) for x in cast(list[float], values)])
    complete = [v for v in vectors if v is not None]
    if len(complete) != expected or len({len(v) for v in complete}) > 1:
        raise malformed(provider, "embeddings differ in length")
    usage = as_object(data.get("usage")) or {}
    tokens = usage.get("prompt_tokens", 0)
    return Embeddings(
        vectors=tuple(complete),
        input_tokens=tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0,
    )
