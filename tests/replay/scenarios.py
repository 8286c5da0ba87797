"""The scenarios whose histories every command version records, and where they live."""

from __future__ import annotations

from pathlib import Path

from workflows.versioning import COMMAND_VERSION

HISTORIES = Path(__file__).parent / "histories"

SCENARIOS = frozenset(
    {
        "adhoc_offline",
        "approval_approved",
        "approval_denied",
        "approval_timeout",
        "authoritative_count",
        "cache_hit",
        "cache_miss_written",
        "context_overflow_then_too_large",
        "first_turn",
        "gate_masked_constrained_hooked",
        "gate_time_budget",
        "hooks_failed",
        "hooks_invocation_member",
        "hooks_tool_round",
        "hostile_no_argument",
        "hostile_non_finite",
        "hostile_refused_after_read",
        "hostile_too_many_values",
        "hostile_two_arguments",
        "managed_inline_summary",
        "observe_failed",
        "observe_inline_summary",
        "observe_parallel",
        "observe_parallel_member",
        "observe_summary_workflow",
        "operator_abandon",
        "operator_retry_now",
        "output_retries_exhausted",
        "output_validation_retry",
        "parallel_cancelled",
        "parallel_member_committed",
        "parallel_one_member_failed",
        "provider_faults_attempt_timeout",
        "provider_faults_stream_cut",
        "retried_provider_call",
        "revision_moved",
        "settings_attempt_policy",
        "settings_tool_policy",
        "storage_blocked",
        "storage_faults_crash_commit",
        "storage_faults_crash_invoke",
        "storage_faults_crash_read",
        "storage_faults_cut_staging",
        "storage_faults_summary_blocked",
        "summary_join_lost",
        "summary_per_step",
        "tool_round",
    }
)
"""Every recorded scenario: the paths a generation, a summary and a parallel run can take."""


def current_histories() -> Path:
    """The folder of the current command version's histories."""
    return HISTORIES / f"v{COMMAND_VERSION}"
