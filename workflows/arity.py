"""Refuse a start with more than one argument: a typed failure, never a wedged task.

The project's workflows take one JSON object. A client that sends two or more arguments
would otherwise make the SDK decode them without type hints (an undecodable one fails the
workflow *task*, retried forever) and call `run` with too many (a `TypeError`, the same).
The worker's payload converter leaves such arguments raw (`raw_extras_converter`), and its
interceptor hands the run one `ExtraArguments` instead, which the run refuses like any
other invalid input: a content-free `ConfigurationError` (`too_many_arguments`), with the
run's stage, search attribute and current details saying `failed`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue
from temporalio.converter import PayloadConverter
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from contracts.decoding import ExtraArguments

SINGLE_INPUT_WORKFLOWS = frozenset(
    {"ManagedGenerationWorkflow", "SummaryWorkflow", "ParallelGenerationWorkflow"}
)
"""The workflow types whose run takes exactly one JSON object."""


class _SingleInput(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        if len(input.args) > 1 and workflow.info().workflow_type in SINGLE_INPUT_WORKFLOWS:
            extra = ExtraArguments(Payload(), count=len(input.args))
            input = dataclasses.replace(input, args=[extra])
        return await self.next.execute_workflow(input)


class SingleInputInterceptor(Interceptor):
    """Worker interceptor: a start with extra arguments is refused by the run, typed."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        """The inbound interceptor that checks the argument count."""
        return _SingleInput


_RAW_EXTRAS: dict[type[PayloadConverter], type[PayloadConverter]] = {}


def raw_extras_converter(base: type[PayloadConverter]) -> type[PayloadConverter]:
    """`base`, except that several payloads decoded without type hints stay raw.

    The SDK decodes a start's arguments without hints only when their count differs from
    the run method's; left raw, they cannot fail the task, and the interceptor refuses
    them. Every call that has hints (activity results, updates, queries) is unchanged.
    """
    if base in _RAW_EXTRAS.values():
        return base  # already leaves extras raw
    if base not in _RAW_EXTRAS:

        class _RawExtras(base):
            def from_payloads(
                self, payloads: Sequence[Payload], type_hints: list[type] | None = None
            ) -> list[Any]:
                if type_hints is None and len(payloads) > 1:
                    return [RawValue(payload) for payload in payloads]
                return super().from_payloads(payloads, type_hints)  # pyright: ignore[reportAbstractUsage]

        _RAW_EXTRAS[base] = _RawExtras
    return _RAW_EXTRAS[base]
