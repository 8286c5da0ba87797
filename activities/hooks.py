"""Run a registered step hook: build its content-free context, validate its overrides."""

from __future__ import annotations

from activities._inputs import scoped_key
from activities._registries import HookLookup
from contracts.hooks import PrepareStepInput, PrepareStepResult
from planner import ModelCatalog
from storage import GenerationStore
from telemetry.logs import get_logger
from vocabulary.errors import ConfigurationError, CruxError, PreparationError
from vocabulary.ids import check_model_id
from vocabulary.registration import not_registered_message
from vocabulary.staging import turn_kind

_log = get_logger(__name__)


class StepPreparer:
    """Runs `prepare_step` / `prepare_invocation` hooks registered on this worker.

    Args:
        generations: Generation staging (the turn's tool calls are read from it).
        hooks: The registered hooks.
        catalog: Model profiles (an overriding model is planned with its profile).
    """

    def __init__(
        self, generations: GenerationStore, hooks: HookLookup, catalog: ModelCatalog
    ) -> None:
        self._generations = generations
        self._hooks = hooks
        self._catalog = catalog

    async def prepare(self, request: PrepareStepInput) -> PrepareStepResult:
        """Run the hook once and return its validated decision.

        Raises:
            PreparationError: The hook is not registered here, or it raised.
            ConfigurationError: It returned invalid overrides (an unknown tool, a bad
                model id or budget).
        """
        context = request.context
        hook = self._hooks.get(context.hook)
        if hook is None:
            raise PreparationError(
                "hook_not_registered", not_registered_message("hook", context.hook)
            )
        offered = set(context.tools)
        context = context.model_copy(
            update={"tools_called": await self._tools_called(request, offered)}
        )
        try:
            overrides = await hook.run(context)
        except CruxError:
            raise
        except Exception as error:  # user code: only the exception's type is reported
            _log.warning(
                "generation.hook.failed",
                hook=context.hook,
                generation_id=context.generation_id,
                error=type(error).__name__,
            )
            raise PreparationError(
                "hook_failed", f"hook {context.hook} raised {type(error).__name__}"
            ) from None
        profile = None
        if overrides is not None:
            if overrides.active_tools is not None and not set(overrides.active_tools) <= offered:
                raise ConfigurationError("prepare_step: active_tools names a tool not offered")
            if overrides.model is not None:
                try:
                    check_model_id(overrides.model)
                except ValueError:
                    raise ConfigurationError("prepare_step: invalid model id") from None
                profile = self._catalog.resolve(overrides.model)
        _log.info(
            "generation.hook.decided",
            hook=context.hook,
            generation_id=context.generation_id,
            step=context.step,
            reason=context.reason,
            overridden=list(overrides.overridden()) if overrides else [],
        )
        return PrepareStepResult(overrides=overrides, profile=profile)

    async def _tools_called(self, request: PrepareStepInput, offered: set[str]) -> tuple[str, ...]:
        """Names of the offered tools called in the turn so far (never their arguments)."""
        names: list[str] = []
        key = scoped_key(request.context)
        for index in range(request.turn_messages):
            staged = await self._generations.get_staged(key, 0, turn_kind(index))
            if staged is None:
                continue
            # A name the model invented could carry anything it was shown: only offered
            # (registered) names are reported.
            names.extend(
                call.tool_name for call in staged.message.tool_calls if call.tool_name in offered
            )
        return tuple(names)
