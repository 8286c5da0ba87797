"""Refuse a start with more than one argument: a typed failure, never a wedged task.

The project's workflows take one JSON object. A client that sends two or more arguments
would otherwise make the SDK call `run` with too many, a `TypeError` that fails the
workflow *task* and is retried forever. This interceptor fails the workflow instead, with a
content-free `ConfigurationError`, before the run starts.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from vocabulary.errors import ErrorType

SINGLE_INPUT_WORKFLOWS = frozenset(
    {"ManagedGenerationWorkflow", "SummaryWorkflow", "ParallelGenerationWorkflow"}
)
"""The workflow types whose run takes exactly one JSON object."""


class _SingleInput(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        if len(input.args) > 1 and workflow.info().workflow_type in SINGLE_INPUT_WORKFLOWS:
            raise ApplicationError(
                f"the workflow takes one JSON object, not {len(input.args)} arguments",
                type=ErrorType.CONFIGURATION,
                non_retryable=True,
            )
        return await self.next.execute_workflow(input)


class SingleInputInterceptor(Interceptor):
    """Worker interceptor: a start with extra arguments fails the workflow, typed."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        """The inbound interceptor that checks the argument count."""
        return _SingleInput
