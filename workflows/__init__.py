"""Temporal workflows: sequencing only; decisions come from `planner`."""

from workflows.generation import ManagedGenerationWorkflow
from workflows.parallel import ParallelGenerationWorkflow
from workflows.summary import SummaryWorkflow

__all__ = ["ManagedGenerationWorkflow", "ParallelGenerationWorkflow", "SummaryWorkflow"]
