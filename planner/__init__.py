"""Pure, deterministic whole-request planning.

The planner measures one provider request as a whole (system content, history, current turn,
tools, schemas, output reserve, provider overhead, safety margin), selects the
highest-fidelity legal representation of every context contributor under the two-tier input
budget, and seals a content-free plan and receipt, or raises `RequestCompositionError`.

It performs no I/O, reads no clock, draws no randomness and runs no tokenizer: token counts
and ids arrive as data, so it can run inside Temporal workflows.
"""

from planner.budget import (
    PROVIDER_OVERHEAD_TOKENS,
    SAFETY_MARGIN_PERCENT,
    DerivedBudget,
    InputBudget,
    derive_budget,
    merge_input_budgets,
)
from planner.builders import context, droppable, offloadable, prefer, summarizable
from planner.columns import HistoryColumns
from planner.contributors import contributor_id, source_ids, with_source_tokens
from planner.history import HistoryAggregate, HistoryItem, HistoryWarning
from planner.inspection import with_runtime_facts
from planner.ladder import (
    Contributor,
    Droppable,
    Offloadable,
    Prefer,
    Source,
    SourceGroup,
    Summarizable,
    Tool,
)
from planner.measure import (
    DEFAULT_MESSAGE_FORMAT,
    MESSAGE_FORMATS,
    DocumentPart,
    ImagePart,
    MessageFormat,
    estimate_media_tokens,
    message_format,
    message_tokens,
)
from planner.policies import (
    ExactHistory,
    HistoryPolicy,
    HistorySummary,
    ManagedHistory,
    RecentHistory,
    history,
)
from planner.preview import Preview, PreviewAdaptation, preview
from planner.profiles import ModelCatalog, ModelProfile, conservative_profile
from planner.receipt import (
    Adaptation,
    ArtifactRecord,
    Breakdown,
    BreakdownEntry,
    CacheRecord,
    CandidateRecord,
    ContributionRecord,
    Counting,
    Diagnostic,
    HistoryRecord,
    ReceiptWarning,
    RequestInspection,
    RequestReceipt,
    SettingsRecord,
    StepPreparation,
    SupportRequestRecord,
)
from planner.request import EpochFloor, EpochFloors, PlanRequest, epoch_key
from planner.seal import inspect_plan, needs_authoritative_count, plan
from planner.sealed import ContributorChoice, HistorySummaryPlacement, Preparation, SealedPlan
from planner.summaries import (
    SUMMARY_CHUNK_TOKENS,
    SUMMARY_CHUNK_UNITS,
    SummaryChunk,
    summary_calls,
    summary_chunks,
)
from planner.summary_choice import background_preparations, inline_preparations
from vocabulary.errors import ConfigurationError, CruxError, RequestCompositionError

__all__ = [
    "Adaptation",
    "ArtifactRecord",
    "Breakdown",
    "BreakdownEntry",
    "CacheRecord",
    "CandidateRecord",
    "ConfigurationError",
    "ContributionRecord",
    "Contributor",
    "ContributorChoice",
    "Counting",
    "CruxError",
    "DEFAULT_MESSAGE_FORMAT",
    "DerivedBudget",
    "Diagnostic",
    "DocumentPart",
    "Droppable",
    "EpochFloor",
    "EpochFloors",
    "ExactHistory",
    "HistoryAggregate",
    "HistoryColumns",
    "HistoryItem",
    "HistoryPolicy",
    "HistoryRecord",
    "HistorySummary",
    "HistorySummaryPlacement",
    "HistoryWarning",
    "ImagePart",
    "InputBudget",
    "MESSAGE_FORMATS",
    "ManagedHistory",
    "MessageFormat",
    "ModelCatalog",
    "ModelProfile",
    "Offloadable",
    "PROVIDER_OVERHEAD_TOKENS",
    "PlanRequest",
    "Prefer",
    "Preparation",
    "Preview",
    "PreviewAdaptation",
    "ReceiptWarning",
    "RecentHistory",
    "RequestCompositionError",
    "RequestInspection",
    "RequestReceipt",
    "SAFETY_MARGIN_PERCENT",
    "SUMMARY_CHUNK_TOKENS",
    "SUMMARY_CHUNK_UNITS",
    "SealedPlan",
    "SettingsRecord",
    "Source",
    "SourceGroup",
    "StepPreparation",
    "Summarizable",
    "SummaryChunk",
    "SupportRequestRecord",
    "Tool",
    "background_preparations",
    "conservative_profile",
    "context",
    "contributor_id",
    "derive_budget",
    "droppable",
    "epoch_key",
    "estimate_media_tokens",
    "history",
    "inline_preparations",
    "inspect_plan",
    "merge_input_budgets",
    "message_format",
    "message_tokens",
    "needs_authoritative_count",
    "offloadable",
    "plan",
    "prefer",
    "preview",
    "source_ids",
    "summarizable",
    "summary_calls",
    "summary_chunks",
    "with_runtime_facts",
    "with_source_tokens",
]
