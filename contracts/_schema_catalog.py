"""What is published of the workflow contract: the schemas, their examples, the handlers.

The table behind `contracts.schemas`: one `SchemaSpec` per schema (the shape it is generated
from, its title and one example), the manifest of which schema each workflow's run, queries
and updates use, and the test vectors of the workflow-id rule.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from contracts.activities import PrepareSummaryInput, PrepareSummaryResult
from contracts.approvals import (
    QUERY_PENDING_APPROVALS,
    UPDATE_APPROVE,
    UPDATE_DENY,
    ApprovalDecision,
    PendingApproval,
)
from contracts.generation import GenerationInput, GenerationOutcome, Usage
from contracts.operator import GenerationStatus
from contracts.parallel import ParallelInput, ParallelOutcome
from planner import HistorySummary
from vocabulary.commits import ThreadCommit
from vocabulary.details import DETAILS_VERSION, ErrorDetails
from vocabulary.ids import (
    assistant_message_id,
    generation_key,
    member_workflow_id,
    parallel_member_generation_id,
    parallel_member_workflow_id,
    parallel_workflow_id,
    user_message_id,
    workflow_id_for,
)
from vocabulary.stages import Stage

DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect of every schema."""

CONTRACT_FILE = "contract.json"
"""Which schema each workflow's run, queries and updates use."""

ID_VECTORS_FILE = "workflow-ids.test-vectors.json"
"""Inputs and the workflow ids they must map to."""

MemberState = typing.Literal["pending", "running", "completed", "failed"]
StageName = typing.Literal[tuple(stage.value for stage in Stage)]


@dataclass(frozen=True)
class SchemaSpec:
    """One published schema.

    Attributes:
        name: The file stem (`generation-input` is `generation-input.schema.json`).
        shape: The pydantic model or type the schema describes.
        title: The schema's title.
        example: One value that validates (and, for an input, that the workflow accepts).
        description: The schema's description; the model's docstring when empty.
        mode: `validation` for what a client sends, `serialization` for what it receives.
    """

    name: str
    shape: Any
    title: str
    example: Any
    description: str = ""
    mode: typing.Literal["validation", "serialization"] = "validation"

    @property
    def file(self) -> str:
        """The file name."""
        return f"{self.name}.schema.json"


_GENERATION_EXAMPLE: dict[str, Any] = {
    "generation_id": "gen-2024-0001",
    "thread_id": "support-ticket-42",
    "model": "offline:echo",
    "input": "Where is my order?",
    "history": {"kind": "recent", "messages": 20},
    "input_budget": {"max": 4000},
    "max_output_tokens": 512,
}

_OUTCOME_EXAMPLE = GenerationOutcome(
    generation_id="gen-2024-0001",
    thread_id="support-ticket-42",
    output_message_id=assistant_message_id("gen-2024-0001"),
    thread_commit=ThreadCommit(
        status="selected",
        message_ids=(user_message_id("gen-2024-0001"), assistant_message_id("gen-2024-0001")),
        parent_id="msg-0040",
        selected_head=assistant_message_id("gen-2024-0001"),
        committed_at=datetime(2024, 5, 1, 12, 0, 3, tzinfo=UTC),
    ),
    request_ids=("request_5f0c2d7e9b1a4c3d8e6f7a8b9c0d1e2f",),
    usage=Usage(input_tokens=18, output_tokens=6),
    history_source="thread",
).model_dump(mode="json")

_PARALLEL_EXAMPLE: dict[str, Any] = {
    "parallel_id": "review-2024-0001",
    "members": [
        {
            "name": "critic",
            "generation": {
                "generation_id": parallel_member_generation_id("review-2024-0001", "critic"),
                "thread_id": "review-critic",
                "model": "offline:echo",
                "input": "Review the draft.",
            },
        },
        {
            "name": "editor",
            "generation": {
                "generation_id": parallel_member_generation_id("review-2024-0001", "editor"),
                "model": "offline:echo",
                "input": "Edit the draft.",
            },
        },
    ],
}

_SUMMARY_EXAMPLE: dict[str, Any] = {
    "thread_id": "support-ticket-42",
    # The first message of the generation example's turn: the example runs after it.
    "through_id": user_message_id("gen-2024-0001"),
    "strategy": "adaptive",
    "model": "offline:echo",
    "counting_model": "offline:echo",
}

SCHEMAS: tuple[SchemaSpec, ...] = (
    SchemaSpec(
        "generation-input",
        GenerationInput,
        "Generation input",
        _GENERATION_EXAMPLE,
    ),
    SchemaSpec(
        "generation-outcome",
        GenerationOutcome,
        "Generation outcome",
        _OUTCOME_EXAMPLE,
        mode="serialization",
    ),
    SchemaSpec(
        "generation-status",
        GenerationStatus,
        "Generation status (the `describe` query)",
        {
            "workflow_id": workflow_id_for("gen-2024-0001", "support-ticket-42"),
            "stage": "invoking",
            "details": "attempt 1: 812 input tokens",
            "attempt": 1,
            "generation_id": "gen-2024-0001",
            "thread_id": "support-ticket-42",
            "model": "offline:echo",
            "blocked_since": None,
            "last_error_type": None,
            "waiting": False,
        },
        mode="serialization",
    ),
    SchemaSpec(
        "stage",
        StageName,
        "Generation stage",
        "awaiting_approval",
        description=(
            "Where a generation run stands: the answer of the `get_stage` query and of the "
            "`retry_now` and `abandon` updates (the stage the run was in), and the value of "
            "the `CruxStage` search attribute. A run ends `completed`, `failed` or `cancelled`."
        ),
        mode="serialization",
    ),
    SchemaSpec(
        "pending-approvals",
        list[PendingApproval],
        "Pending approvals (the `pending_approvals` query)",
        [{"call_id": "call_7a1f", "tool": "refund_order"}],
        description=(
            "The tool calls a run waits on for a decision, in call order: tool name and call "
            "id only, never arguments. Empty when the run awaits no approval."
        ),
        mode="serialization",
    ),
    SchemaSpec(
        "approval-decision",
        ApprovalDecision,
        "Approval decision (the argument of the `approve` and `deny` updates)",
        {"call_id": "call_7a1f", "reason_code": "policy.refund_limit"},
    ),
    SchemaSpec(
        "approval-result",
        None,
        "Approval result (the result of the `approve` and `deny` updates)",
        None,
        description=(
            "The `approve` and `deny` updates return nothing once the decision is recorded; "
            "a decision the run does not wait for is rejected with a `ConfigurationError`."
        ),
        mode="serialization",
    ),
    SchemaSpec(
        "parallel-input",
        ParallelInput,
        "Parallel input",
        _PARALLEL_EXAMPLE,
    ),
    SchemaSpec(
        "parallel-outcome",
        ParallelOutcome,
        "Parallel outcome",
        {
            "parallel_id": "review-2024-0001",
            "members": [
                {
                    "name": "critic",
                    "workflow_id": parallel_member_workflow_id("review-2024-0001", "critic"),
                    "generation_id": parallel_member_generation_id("review-2024-0001", "critic"),
                    "thread_id": "review-critic",
                    "outcome": None,
                    "failure": {
                        "kind": "error",
                        "error_type": "ProviderAuthError",
                        "message": "openai: HTTP 401; set a valid OPENAI_API_KEY on the worker",
                        "non_retryable": True,
                        "details": {"provider": "openai", "status": 401},
                    },
                }
            ],
        },
        mode="serialization",
    ),
    SchemaSpec(
        "parallel-members",
        dict[str, MemberState],
        "Parallel members (the `get_members` query)",
        {"critic": "completed", "editor": "running"},
        description="Each member's state by member name.",
        mode="serialization",
    ),
    SchemaSpec(
        "summary-input",
        PrepareSummaryInput,
        "Summary input",
        _SUMMARY_EXAMPLE,
    ),
    SchemaSpec(
        "summary-result",
        PrepareSummaryResult,
        "Summary result",
        PrepareSummaryResult(
            summary=HistorySummary(artifact_id="summary_2b9d", tokens=212, covers=40),
            support_calls=1,
        ).model_dump(mode="json"),
        mode="serialization",
    ),
    SchemaSpec(
        "failure-details",
        ErrorDetails,
        "Failure details",
        {"crux_details": DETAILS_VERSION, "code": "invalid_input", "fields": ["max_tool_rounds"]},
        description=(
            "The one detail of every typed failure (`ApplicationError.details[0]`): a JSON "
            "object, marked with its version (`crux_details`), holding the keys the failure's "
            "family fills (see the failure reference). Content-free: codes, ids, figures."
        ),
        mode="serialization",
    ),
)
"""Every published schema, in the order the reference lists them."""

CONTRACT: dict[str, Any] = {
    "ManagedGenerationWorkflow": {
        "workflow_id": "workflow_id_for(generation_id, thread_id): see " + ID_VECTORS_FILE,
        "run": {"argument": "generation-input", "result": "generation-outcome"},
        "queries": {
            "get_stage": {"result": "stage"},
            "describe": {"result": "generation-status"},
            QUERY_PENDING_APPROVALS: {"result": "pending-approvals"},
        },
        "updates": {
            UPDATE_APPROVE: {"argument": "approval-decision", "result": "approval-result"},
            UPDATE_DENY: {"argument": "approval-decision", "result": "approval-result"},
            "retry_now": {"argument": None, "result": "stage"},
            "abandon": {"argument": None, "result": "stage"},
        },
        "signals": {},
        "failure_details": "failure-details",
    },
    "ParallelGenerationWorkflow": {
        "workflow_id": "parallel_workflow_id(parallel_id): see " + ID_VECTORS_FILE,
        "run": {"argument": "parallel-input", "result": "parallel-outcome"},
        "queries": {"get_members": {"result": "parallel-members"}},
        "updates": {},
        "signals": {},
        "failure_details": "failure-details",
    },
    "SummaryWorkflow": {
        "workflow_id": "started by generations as a child; clients only read it",
        "run": {"argument": "summary-input", "result": "summary-result"},
        "queries": {},
        "updates": {},
        "signals": {},
        "failure_details": "failure-details",
    },
}
"""Which schema each workflow's run, queries and updates use (`contract.json`)."""


def id_vectors() -> dict[str, Any]:
    """The workflow-id rule's test vectors: inputs and the ids they map to."""
    generations = [
        ("gen-1", "thread-1"),
        ("gen-1", None),
        ("a/b", "x/y"),
        ("x/y", None),
        ("caf\u00e9 \u2615", "th\u00e9me:2"),
        ("100%", "50% off"),
        ("-._~:", "A-Z_a-z.0~9"),
        ("sp ace+plus", "q?=&#"),
        ("\U0001f600", "\u00fc/\u00e4"),
    ]
    parallel = [
        ("review-1", "critic"),
        ("a/b", "c/d"),
        ("sha256-looks-hashed", "m"),
        ("p", "x" * 64),
        ("\u00e9" * 200, "sha256-member"),
    ]
    return {
        "description": (
            "Test vectors of the workflow-id rule (see docs/how-to/any-client.md). "
            "`encode(c)`: the UTF-8 bytes of `c`, each byte kept if it is an ASCII letter, "
            "digit, `-`, `.`, `_`, `~` or `:`, otherwise written `%XX` (uppercase hex). "
            "`generation_key` is `encode(thread_id) + '/' + encode(generation_id)`, or "
            "`encode(generation_id)` without a Thread; the generation's workflow id is "
            "`crux/gen/` + its key. A parallel run goes by `crux/parallel/` + "
            "encode(parallel_id), unless that is longer than 600 UTF-8 bytes or "
            "encode(parallel_id) starts with `sha256-`: then `crux/parallel/sha256-` + "
            "hex(sha256(J([parallel_id]))). A member goes by the parallel run's id + '/' + "
            "encode(member), the segment replaced by `sha256-` + hex(sha256(J([member]))) "
            "when it is longer than 399 bytes or starts with `sha256-`. A member's generation "
            "id is encode(parallel_id) + '/' + encode(member), or `parallel-sha256-` + "
            "hex(sha256(J([parallel_id, member]))) when that is longer than 256 characters "
            "or starts with `parallel-sha256-`. J(list) is the JSON array as Python's "
            "json.dumps writes it: `, ` between items, every non-ASCII character as "
            "\\uXXXX (UTF-16 code units, lowercase hex), lowercase hex digests."
        ),
        "generations": [
            {
                "generation_id": generation_id,
                "thread_id": thread_id,
                "generation_key": generation_key(generation_id, thread_id),
                "workflow_id": workflow_id_for(generation_id, thread_id),
            }
            for generation_id, thread_id in generations
        ],
        "parallel": [
            {
                "parallel_id": parallel_id,
                "member": member,
                "workflow_id": parallel_workflow_id(parallel_id),
                "member_workflow_id": member_workflow_id(parallel_workflow_id(parallel_id), member),
                "member_generation_id": parallel_member_generation_id(parallel_id, member),
            }
            for parallel_id, member in parallel
        ],
    }
