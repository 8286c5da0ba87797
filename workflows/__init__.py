"""Temporal workflows: sequencing only; decisions come from `planner`.

The workflow classes live in `workflows.generation` (`ManagedGenerationWorkflow`),
`workflows.summary` (`SummaryWorkflow`) and `workflows.parallel`
(`ParallelGenerationWorkflow`); the worker also registers `workflows.arity`'s
`SingleInputInterceptor` and builds its payload converter with `raw_extras_converter`, which
together turn a start with more than one argument into a typed failure instead of a workflow
task that fails forever.

The workflows run outside the SDK's sandbox (`sandboxed=False`; `crux.plugin.CruxPlugin`
explains why), and the test suite replays every recorded history inside it, where the package
is passed through (`crux.plugin.PASSTHROUGH_MODULES`). Either way it is loaded once per
worker and shared by every run, so no module of it keeps state between runs.
This module imports nothing, so that importing one workflow module loads no other.
"""
