"""Temporal workflows: sequencing only; decisions come from `planner`.

Besides the workflow classes, the worker registers `SingleInputInterceptor` and builds its
payload converter with `raw_extras_converter`: together they turn a start with more than
one argument into a typed failure instead of a workflow task that fails forever.
"""

from workflows._arity import SingleInputInterceptor, raw_extras_converter
from workflows.generation import ManagedGenerationWorkflow
from workflows.parallel import ParallelGenerationWorkflow
from workflows.summary import SummaryWorkflow
from workflows.versioning import (
    COMMAND_VERSION,
    DEFAULT_DEPLOYMENT_NAME,
    VERSIONING_BEHAVIOR,
    default_build_id,
)

__all__ = [
    "COMMAND_VERSION",
    "DEFAULT_DEPLOYMENT_NAME",
    "VERSIONING_BEHAVIOR",
    "ManagedGenerationWorkflow",
    "ParallelGenerationWorkflow",
    "SingleInputInterceptor",
    "SummaryWorkflow",
    "default_build_id",
    "raw_extras_converter",
]
