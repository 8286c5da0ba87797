"""Temporal workflows: sequencing only; decisions come from `planner`."""

from workflows.generation import ManagedGenerationWorkflow
from workflows.summary import SummaryWorkflow

__all__ = ["ManagedGenerationWorkflow", "SummaryWorkflow"]
