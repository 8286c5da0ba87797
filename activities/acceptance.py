"""The acceptance gate's activities: input safety, terminal safety and constraints.

Both read the text they judge from staging and write only what their decision requires:
input safety replaces the staged user turn with its transformed text (or empties it on a
block), so the raw text does not outlive the stage; the output check adds its verdict to
the judged request's receipt and withdraws a refused reply from staging, streamed deltas
included. What goes back to the workflow is the content-free report.

Every write is keyed by the generation (and attempt), and each activity reads what an
earlier try of it recorded before deciding again, so a retry after a crash returns the
decision already taken instead of judging text that is no longer there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from activities._inputs import scoped_key
from activities.gate import Constraints, CustomPolicy, Gate
from activities.skeleton import content_tokens
from contracts.acceptance import (
    CheckInputInput,
    CheckInputResult,
    CheckOutputInput,
    CheckOutputResult,
)
from planner import ModelCatalog
from providers import TokenCounter
from storage import GenerationStore, ReceiptStore
from telemetry.logs import get_logger
from vocabulary.errors import ThreadError
from vocabulary.gate import ConstraintReport, GateReport
from vocabulary.messages import Message, TextPart
from vocabulary.staging import StagingKind

_log = get_logger(__name__)

INPUT_GATE_INFO = "input_gate"
"""The key under which the staged user turn's facts record input safety's report."""


class AcceptanceChecks:
    """Runs the gate's policies and constraints on staged text.

    Args:
        generations: Generation staging (the judged texts live there).
        receipts: Request receipts (the output check records its verdict on them).
        catalog: Model profiles (each model's tokenizer measures tokens).
        policies: The custom policy functions registered on this worker, by name.
    """

    def __init__(
        self,
        generations: GenerationStore,
        receipts: ReceiptStore,
        catalog: ModelCatalog,
        policies: Mapping[str, CustomPolicy] | None = None,
    ) -> None:
        self._generations = generations
        self._receipts = receipts
        self._catalog = catalog
        self._policies = dict(policies or {})

    def _counter(self, model: str) -> TokenCounter:
        return TokenCounter.for_encoding(self._catalog.resolve(model).encoding)

    async def check_input(self, request: CheckInputInput) -> CheckInputResult:
        """Run the input policies on the staged user turn and settle the staged row.

        A transform replaces the staged text (what is measured, sent and committed from
        now on); a block empties it. An allow writes nothing.

        Raises:
            ThreadError: `not_found` when no user turn is staged.
            GatePolicyError: A custom policy is not registered here, raised, or returned
                no verdict.
        """
        key = scoped_key(request)
        staged = await self._generations.get_staged(key, 0, StagingKind.USER)
        if staged is None:
            raise ThreadError("not_found", "staged input is missing")
        counter = self._counter(request.model)
        recorded = (staged.info or {}).get(INPUT_GATE_INFO)
        if recorded is not None:
            # An earlier try decided and settled the row; its text is what now stands.
            report = GateReport.model_validate(recorded)
            return CheckInputResult(
                report=report, turn_tokens=content_tokens(counter, [staged.message])[0]
            )
        gate = Gate(request.policies, stage="input", custom=self._policies)
        # Off the event loop: a large text costs a PII pass tenths of a second, during which
        # this worker's other activities and workflow tasks must keep running.
        run = await asyncio.to_thread(
            gate.run, staged.message.text, count_tokens=counter.count_text
        )
        report = run.report
        message = staged.message
        if not report.accepted:
            message = message.model_copy(update={"content": ""})
        elif report.decision == "transform":
            message = _with_text(message, run.text)
        if message is not staged.message:
            info = {**(staged.info or {}), INPUT_GATE_INFO: report.model_dump(mode="json")}
            await self._generations.replace_staged(key, 0, StagingKind.USER, message, info=info)
        _log.info(
            "generation.input.checked",
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            decision=report.decision,
            policy=report.policy,
            reason_code=report.reason_code,
            policies=len(report.outcomes),
        )
        return CheckInputResult(report=report, turn_tokens=content_tokens(counter, [message])[0])

    async def check_output(self, request: CheckOutputInput) -> CheckOutputResult:
        """Judge an attempt's staged reply; record the verdict; withdraw a refused reply.

        Terminal safety runs first; the constraints only judge a reply safety accepted.

        Raises:
            ThreadError: `not_found` when the reply is neither staged nor judged before.
            GatePolicyError: A custom policy could not decide.
        """
        key = scoped_key(request)
        staged = await self._generations.get_staged(key, request.attempt, StagingKind.OUTPUT)
        if staged is None:
            return await self._recorded_verdict(request)
        text = staged.message.text
        counter = self._counter(request.model)
        safety: GateReport | None = None
        constraints: ConstraintReport | None = None
        if request.policies:
            gate = Gate(request.policies, stage="output", custom=self._policies)
            safety = (
                await asyncio.to_thread(gate.run, text, count_tokens=counter.count_text)
            ).report
        if request.constraints and (safety is None or safety.accepted):
            checks = Constraints(request.constraints)
            constraints = await asyncio.to_thread(
                checks.check, text, count_tokens=counter.count_text
            )
        verdict = CheckOutputResult(safety=safety, constraints=constraints)
        # The verdict is recorded before the reply is withdrawn: a retry after a crash in
        # between finds it there.
        await self._receipts.add_verdict(request.request_id, _receipt_fields(verdict))
        refused = (safety is not None and not safety.accepted) or (
            constraints is not None and not constraints.satisfied
        )
        if refused:
            if request.stream:
                await self._generations.drop_deltas(key, request.attempt)
            await self._generations.drop_staged(key, request.attempt)
        _log.info(
            "generation.output.checked",
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            attempt=request.attempt,
            request_id=request.request_id,
            safety=safety.decision if safety else None,
            policy=safety.policy if safety else None,
            reason_code=safety.reason_code if safety else None,
            violations=len(constraints.violations) if constraints else 0,
            withdrawn=refused,
        )
        return verdict.model_copy(update={"withdrawn": refused})

    async def _recorded_verdict(self, request: CheckOutputInput) -> CheckOutputResult:
        """The verdict an earlier try recorded before withdrawing the reply."""
        stored = await self._receipts.load([request.request_id])
        receipt = stored.get(request.request_id)
        fields = receipt.receipt if receipt is not None else {}
        if "output_gate" not in fields and "constraints" not in fields:
            raise ThreadError("not_found", "the reply to check is not staged")
        safety = fields.get("output_gate")
        constraints = fields.get("constraints")
        return CheckOutputResult(
            safety=None if safety is None else GateReport.model_validate(safety),
            constraints=None
            if constraints is None
            else ConstraintReport.model_validate(constraints),
            withdrawn=True,
        )


def _receipt_fields(verdict: CheckOutputResult) -> dict[str, object]:
    """The verdict as the receipt's `output_gate` and `constraints` fields (set ones only)."""
    fields: dict[str, object] = {}
    if verdict.safety is not None:
        fields["output_gate"] = verdict.safety.model_dump(mode="json")
    if verdict.constraints is not None:
        fields["constraints"] = verdict.constraints.model_dump(mode="json")
    return fields


def _with_text(message: Message, text: str) -> Message:
    """`message` with its text replaced by `text` (other parts, such as images, kept).

    A message of several text parts gets the whole transformed text in place of the
    first; the gate judged their concatenation.
    """
    if isinstance(message.content, str):
        return message.model_copy(update={"content": text})
    parts: list[object] = []
    placed = False
    for part in message.content:
        if isinstance(part, TextPart):
            if not placed:
                parts.append(TextPart(text=text))
                placed = True
            continue
        parts.append(part)
    if not placed:
        parts.append(TextPart(text=text))
    return message.model_copy(update={"content": parts})
