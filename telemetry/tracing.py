"""OpenTelemetry spans of the Crux steps: plan, provider attempt, tool call, commit, summary.

Off by default and then free: `span()` yields `None` without touching OpenTelemetry until a
tracer provider is installed (`telemetry.setup.configure`, done by a worker when
`OTEL_EXPORTER_OTLP_ENDPOINT` is set, or by a test with an in-memory exporter).

Attributes follow the OpenTelemetry GenAI semantic conventions where they apply
(`gen_ai.request.model`, `gen_ai.usage.input_tokens`, ...) and carry ids, names, sizes and
decisions only: never message text, tool arguments or model output. `Attributes` is typed so
that only scalars and sequences of scalars can be set, and every value set through this module
is checked by `clean()` first.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int]
Attributes = Mapping[str, AttributeValue | None]

TRACER_NAME = "crux"
"""Instrumentation scope of the Crux spans."""

# GenAI semantic-convention names (https://opentelemetry.io/docs/specs/semconv/gen-ai/).
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_SYSTEM = "gen_ai.system"
"""The older name of `gen_ai.provider.name`, still read by many backends."""
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
ERROR_TYPE = "error.type"

# Longest string value kept on a span: ids and names are short; anything longer is cut so a
# pathological id cannot bloat an export.
_MAX_VALUE_CHARS = 256

_tracer: Tracer | None = None


def install(tracer: Tracer | None) -> None:
    """Use `tracer` for the Crux spans of this process (`None` turns them off).

    Called by `telemetry.setup`; exposed for embedding applications with their own tracer.
    """
    global _tracer
    _tracer = tracer


def enabled() -> bool:
    """Whether Crux spans are recorded in this process."""
    return _tracer is not None


def clean(attributes: Attributes) -> dict[str, AttributeValue]:
    """The attributes without `None` values, long strings cut."""
    kept: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, str):
            kept[key] = value[:_MAX_VALUE_CHARS]
        elif isinstance(value, bool | int | float):
            kept[key] = value
        else:
            kept[key] = tuple(v[:_MAX_VALUE_CHARS] if isinstance(v, str) else v for v in value)  # type: ignore[misc]
    return kept


@contextmanager
def span(name: str, attributes: Attributes | None = None) -> Generator[Span | None]:
    """A span around a Crux step, current for its duration (`None` when tracing is off).

    An exception leaving the block marks the span as an error with `error.type` (the
    exception's class or its Temporal error type), never its message.

    Args:
        name: Span name, e.g. `chat openai:gpt-4o` or `crux.commit`.
        attributes: Content-free attributes.
    """
    tracer = _tracer
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import Status, StatusCode

    # Exceptions are recorded by hand: the SDK's own recording would copy the message.
    with tracer.start_as_current_span(
        name,
        attributes=clean(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as error:
            current.set_attribute(ERROR_TYPE, error_type(error))
            current.set_status(Status(StatusCode.ERROR))
            raise


def annotate(attributes: Attributes) -> None:
    """Add content-free attributes to the current Crux span, if one is recording."""
    if _tracer is None:
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(clean(attributes))


def error_type(error: BaseException) -> str:
    """A content-free class for an error: its Temporal `type` when it has one, else its class."""
    typed = getattr(error, "type", None)
    if isinstance(typed, str) and typed:
        return typed[:_MAX_VALUE_CHARS]
    return type(error).__name__


def provider_of(model: str) -> str:
    """The provider name of a `provider:model` id (`openai`, `anthropic`, `offline`, ...)."""
    provider, separator, _ = model.partition(":")
    return provider if separator else "unknown"
