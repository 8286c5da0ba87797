"""The acceptance gate's text checks: policies and constraints, pure and content-free.

Runs inside activities on the worker. `Gate` runs policies in order over a text (PII
masking, length limits, deny lists, custom functions) and returns the resulting text and
a `GateReport` that holds decisions, policy names, reason codes and counts, never text;
`Constraints` checks accepted text against declarative constraints. Specs and reports are
in `contracts.gate`, so workflows and the facade share them.

Everything here is deterministic and does no I/O. What the PII detectors catch and miss
is documented in `activities/gate/_pii.py`; the limits on caller-written regular
expressions in `activities/gate/_patterns.py`.
"""

from activities.gate._constraints import Constraints, check_constraints
from activities.gate._errors import GatePolicyError, GatePolicyErrorCode
from activities.gate._gate import Gate, GateRun, run_gate
from activities.gate._patterns import MAX_REGEX_TEXT_CHARS, check_pattern
from activities.gate._pii import PiiPolicy
from activities.gate._spans import Span
from activities.gate._verdicts import (
    Allow,
    Block,
    CustomPolicy,
    Retry,
    TokenCount,
    Transform,
    Verdict,
)

__all__ = [
    "Allow",
    "Block",
    "Constraints",
    "CustomPolicy",
    "Gate",
    "GatePolicyError",
    "GatePolicyErrorCode",
    "GateRun",
    "MAX_REGEX_TEXT_CHARS",
    "PiiPolicy",
    "Retry",
    "Span",
    "TokenCount",
    "Transform",
    "Verdict",
    "check_constraints",
    "check_pattern",
    "run_gate",
]
