"""Temporal workflows: sequencing only; decisions come from `planner`."""

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
