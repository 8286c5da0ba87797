"""The gate's one error: a custom policy that could not decide (see `vocabulary.gate_errors`).

It is declared at the leaf of the import graph so that it crosses Temporal typed, through
the failure registry, like every other error family.
"""

from __future__ import annotations

from vocabulary.gate_errors import GatePolicyError, GatePolicyErrorCode

__all__ = ["GatePolicyError", "GatePolicyErrorCode"]
