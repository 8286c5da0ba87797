"""Test models: replies, tool calls, structured output and faults written in the test.

A test model is served by the worker itself (no network, no key), addressed by its model id
`test:<name>`: register it with `crux.Worker(models=[model])` and name it in a call
(`model=model.id`). `ScriptedModel` answers each provider call with the next step of its
script; `FunctionModel` asks a function of the request. Both record every request they
answer (`model.requests`), as the model saw it: messages, offered tools, tool choice and the
output schema.

Token usage is counted with the offline tokenizer (`cl100k_base`), and the profile says so,
so the planner's counts for a test model are exact.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from planner import ModelProfile
from providers import (
    ChatProvider,
    ChatRequest,
    ChatResponse,
    StreamDone,
    StreamEvent,
    SummaryRequest,
    TextDelta,
    TokenCounter,
    ToolChoiceTool,
    Usage,
    estimate_request,
)
from providers.offline import OFFLINE_ENCODING
from vocabulary.errors import (
    ConfigurationError,
    ContextOverflowError,
    ProviderConnectionError,
    ProviderError,
    ProviderResponseError,
    ProviderTimeoutError,
    http_error,
)
from vocabulary.ids import check_model_id
from vocabulary.messages import Message, Part, TextPart, ToolCallPart

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "PROVIDER",
    "Fault",
    "FunctionModel",
    "ModelRequest",
    "Reply",
    "ScriptedModel",
    "Step",
    "ToolCall",
]

PROVIDER = "test"
"""The provider prefix of test model ids."""

DEFAULT_CONTEXT_WINDOW = 32_768
"""The window a test model's profile declares unless told otherwise."""


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model makes.

    Attributes:
        name: The tool's name (registered on the worker).
        arguments: The arguments object.
        id: The call id (derived from the call when omitted).
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict[str, Any])
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """One answer of the model.

    Attributes:
        text: The reply text.
        tool_calls: Tool calls instead of (or beside) the text: the worker runs them and
            asks the model again with their results.
        output: Structured output: a JSON value or a pydantic model instance, sent as its JSON
            text (the call's `output=` validates it).
        finish_reason: `stop`, `length`, `tool_calls`, `content_filter`, ... (derived when
            omitted).
        output_tokens: The output usage reported (counted from the text when omitted).
    """

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    output: Any = None
    finish_reason: str | None = None
    output_tokens: int | None = None


FaultKind = Literal["http", "timeout", "connection", "overflow", "malformed"]


@dataclass(frozen=True)
class Fault:
    """A provider failure, raised as the provider client would raise it.

    Retryable faults (HTTP 408, 409, 429, 5xx, timeouts, connection failures) are retried
    under the call's `attempt_policy`, each retry taking the script's next step.

    Attributes:
        kind: `http`, `timeout`, `connection`, `overflow` (the input is too long: the
            generation plans once more under a stricter ceiling) or `malformed`.
        status: The HTTP status of an `http` fault.
        retry_after: Seconds the provider asks to wait (an `http` fault).
    """

    kind: FaultKind = "http"
    status: int = 500
    retry_after: float | None = None

    @classmethod
    def http(cls, status: int, *, retry_after: float | None = None) -> Fault:
        """An HTTP error status (401/403 auth, 404 not found, 429 and 5xx retried)."""
        return cls("http", status, retry_after)

    @classmethod
    def timeout(cls) -> Fault:
        """The provider did not answer in time (retried)."""
        return cls("timeout")

    @classmethod
    def connection(cls) -> Fault:
        """The connection failed (retried)."""
        return cls("connection")

    @classmethod
    def overflow(cls) -> Fault:
        """The provider says the input exceeds the model's context window."""
        return cls("overflow", 400)

    @classmethod
    def malformed(cls) -> Fault:
        """The response was unusable (not retried)."""
        return cls("malformed")

    def error(self) -> ProviderError:
        """The error a provider client raises for this fault."""
        if self.kind == "timeout":
            return ProviderTimeoutError(PROVIDER, "the test model timed out (scripted)")
        if self.kind == "connection":
            return ProviderConnectionError(PROVIDER, "the test model dropped the connection")
        if self.kind == "overflow":
            return ContextOverflowError(PROVIDER, self.status, error_type="context_length_exceeded")
        if self.kind == "malformed":
            return ProviderResponseError(PROVIDER, "the test model sent a malformed response")
        return http_error(PROVIDER, self.status, retry_after=self.retry_after)


Step = str | Reply | ToolCall | Fault
"""One scripted answer: reply text, a `Reply`, one `ToolCall`, or a `Fault` to raise."""


@dataclass(frozen=True)
class ModelRequest:
    """A provider call as the test model receives it.

    Attributes:
        model: The model id (`test:<name>`).
        messages: The messages sent, system messages included, in order.
        tools: The names of the tools offered.
        tool_choice: `auto`, `none`, `required`, a tool's name, or `None` (unset).
        output_schema: The JSON schema the reply must match (structured output), if any.
        max_output_tokens: The output cap of the call.
    """

    model: str
    messages: tuple[Message, ...]
    tools: tuple[str, ...] = ()
    tool_choice: str | None = None
    output_schema: Mapping[str, Any] | None = None
    max_output_tokens: int | None = None

    @property
    def last_user_text(self) -> str | None:
        """The text of the last user message, if any."""
        users = [message for message in self.messages if message.role == "user"]
        return users[-1].text if users else None

    @property
    def tool_results(self) -> tuple[Message, ...]:
        """The tool results the request ends with (the round the model is asked to answer)."""
        results: list[Message] = []
        for message in reversed(self.messages):
            if message.role != "tool":
                break
            results.append(message)
        return tuple(reversed(results))


def _request_view(model_id: str, request: ChatRequest) -> ModelRequest:
    choice = request.tool_choice
    return ModelRequest(
        model=model_id,
        messages=tuple(request.messages),
        tools=tuple(tool.name for tool in request.tools),
        tool_choice=choice.name if isinstance(choice, ToolChoiceTool) else choice,
        output_schema=request.response_format,
        max_output_tokens=request.max_output_tokens,
    )


def _profile(model_id: str, context_window: int) -> ModelProfile:
    try:
        return ModelProfile(
            id=model_id,
            # Measured with the offline provider's framing and tokenizer, which it counts with.
            provider="offline",
            context_window=context_window,
            default_output_reserve=min(1_024, context_window // 4),
            confidence="exact",
            encoding=OFFLINE_ENCODING,
        )
    except ValueError:
        raise ConfigurationError(
            "a test model's context_window must be at least 8 tokens"
        ) from None


def _model_id(name: str) -> str:
    if not isinstance(name, str) or not name:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("a test model needs a name (its id is test:<name>)")
    return check_model_id(f"{PROVIDER}:{name}")


class _TestModel:
    """What both test models share: id, profile, recorded requests, the provider."""

    def __init__(self, name: str, context_window: int) -> None:
        self._id = _model_id(name)
        self._profile = _profile(self._id, context_window)
        self._counter = TokenCounter.for_encoding(OFFLINE_ENCODING)
        self._calls = itertools.count(1)
        self.requests: list[ModelRequest] = []

    @property
    def id(self) -> str:
        """The model id to name in calls: `test:<name>`."""
        return self._id

    @property
    def profile(self) -> ModelProfile:
        """Its capacity profile (exact counting with `cl100k_base`)."""
        return self._profile

    def provider(self) -> ChatProvider:
        """The provider the worker routes this model's calls to."""
        return _Provider(self)

    async def _answer(self, request: ModelRequest) -> Step:
        raise NotImplementedError

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        view = _request_view(self._id, request)
        self.requests.append(view)
        step = await self._answer(view)
        if isinstance(step, Fault):
            raise step.error()
        reply = _as_reply(step)
        number = next(self._calls)
        digest = hashlib.sha256(f"{self._id}/{number}".encode()).hexdigest()[:12]
        calls = [
            ToolCallPart(
                tool_call_id=call.id or f"test-call-{digest}-{index}",
                tool_name=call.name,
                input=dict(call.arguments),
            )
            for index, call in enumerate(reply.tool_calls)
        ]
        text = reply.text if reply.output is None else _json_text(reply.output)
        parts: list[Part] = [*([TextPart(text=text)] if text else []), *calls]
        message = Message(role="assistant", content=parts if calls else text)
        output = reply.output_tokens
        if output is None:
            output = self._counter.count_message(message)
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        return ChatResponse(
            message=message,
            finish_reason=finish,
            usage=Usage(
                input_tokens=estimate_request(request, self._counter).total,
                output_tokens=output,
            ),
            model=request.model,
            response_id=f"test-{digest}",
            provider_finish_reason=finish,
        )

    async def _count(self, request: ChatRequest) -> int:
        return estimate_request(request, self._counter).total


class _Provider:
    """The `ChatProvider` face of a test model (streaming included)."""

    provider = PROVIDER

    def __init__(self, model: _TestModel) -> None:
        self._model = model

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Answer with the model's next step."""
        return await self._model._complete(request)  # pyright: ignore[reportPrivateUsage]

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """The same answer, delivered word by word."""
        response = await self.complete(request)
        words = response.message.text.split(" ") if response.message.text else []
        for index, word in enumerate(words):
            yield TextDelta(text=word if index == 0 else " " + word)
        yield StreamDone(response=response)

    async def count_tokens(self, request: ChatRequest) -> int:
        """The exact input count (the tokenizer the profile names)."""
        return await self._model._count(request)  # pyright: ignore[reportPrivateUsage]

    async def summarize(self, request: SummaryRequest) -> Message | None:
        """No native summaries: managed history takes the portable path (a `complete`)."""
        del request
        return None


class ScriptedModel(_TestModel):
    """A model that answers each provider call with the next step of a script.

    Every provider call takes one step, whatever the call is: a tool round's follow-up, a
    validation retry, a retried attempt after a fault, and a managed-history summary made
    with this model (name another summary model, such as `offline:echo`, to keep the script
    for the conversation). A call after the last step fails the generation with a
    `ConfigurationError` saying so.

    ```python
    model = crux.testing.ScriptedModel(
        [ToolCall("get_weather", {"city": "Oslo"}), "Rain, 12 degrees."], name="weather"
    )
    worker = crux.Worker(tools=[get_weather], models=[model])
    result = await runtime.generate(prompt, input="Rain?", model=model.id)
    ```

    Args:
        script: The steps, in order (more can be added with `add`).
        name: The model's name; its id is `test:<name>`.
        context_window: The window its profile declares.
    """

    def __init__(
        self,
        script: Iterable[Step] = (),
        *,
        name: str = "scripted",
        context_window: int = DEFAULT_CONTEXT_WINDOW,
    ) -> None:
        super().__init__(name, context_window)
        self._script: deque[Step] = deque()
        self.add(*script)

    def add(self, *steps: Step) -> None:
        """Append steps to the script.

        Raises:
            ConfigurationError: A step is not text, a `Reply`, a `ToolCall` or a `Fault`.
        """
        for step in steps:
            if not isinstance(step, (str, Reply, ToolCall, Fault)):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ConfigurationError(
                    "a script step is reply text, a Reply, a ToolCall or a Fault, not a "
                    f"{type(step).__name__}"
                )
            self._script.append(step)

    @property
    def pending(self) -> int:
        """Steps not answered yet."""
        return len(self._script)

    async def _answer(self, request: ModelRequest) -> Step:
        if not self._script:
            raise ConfigurationError(
                f"test model {self.id} has no scripted step left for call "
                f"{len(self.requests)}: add one (model.add(...)) or script fewer calls"
            )
        return self._script.popleft()


ModelFunction = Callable[[ModelRequest], Step | Awaitable[Step]]
"""A function of the request returning the step to answer with (sync or async)."""


class FunctionModel(_TestModel):
    """A model that asks a function of yours for each answer.

    ```python
    def answer(request: crux.testing.ModelRequest) -> crux.testing.Step:
        if request.tool_results:
            return f"The tool said {request.tool_results[-1].text}"
        return crux.testing.ToolCall("get_weather", {"city": "Oslo"})

    model = crux.testing.FunctionModel(answer, name="weather")
    ```

    Args:
        function: Gets the `ModelRequest`, returns a step (or raises: the generation then
            fails with a `ConfigurationError` naming the exception's type).
        name: The model's name; its id is `test:<name>`.
        context_window: The window its profile declares.
    """

    def __init__(
        self,
        function: ModelFunction,
        *,
        name: str = "function",
        context_window: int = DEFAULT_CONTEXT_WINDOW,
    ) -> None:
        if not callable(function):
            raise ConfigurationError("FunctionModel takes a function of the request")
        super().__init__(name, context_window)
        self._function = function

    async def _answer(self, request: ModelRequest) -> Step:
        try:
            step = self._function(request)
            if inspect.isawaitable(step):
                step = await step
        except ProviderError:
            raise
        except Exception as error:  # the test's own code: its type says what went wrong
            raise ConfigurationError(
                f"the function of test model {self.id} raised {type(error).__name__}"
            ) from error
        return step


def _as_reply(step: Step) -> Reply:
    if isinstance(step, Reply):
        return step
    if isinstance(step, ToolCall):
        return Reply(tool_calls=(step,))
    if isinstance(step, str):
        return Reply(text=step)
    raise ConfigurationError(
        f"a test model answers with text, a Reply, a ToolCall or a Fault, not a "
        f"{type(step).__name__}"
    )


def _json_text(value: Any) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError):
        raise ConfigurationError("Reply.output must be JSON or a pydantic model") from None
