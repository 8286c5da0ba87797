"""Temporal workflows: sequencing only; decisions come from `planner`."""

from workflows.generation import ManagedGenerationWorkflow

__all__ = ["ManagedGenerationWorkflow"]
