"""Temporal workflows: sequencing only; decisions come from `planner`.

The workflow classes live in `workflows.generation` (`ManagedGenerationWorkflow`),
`workflows.summary` (`SummaryWorkflow`) and `workflows.parallel`
(`ParallelGenerationWorkflow`); the worker also registers `workflows.arity`'s
`SingleInputInterceptor` and builds its payload converter with `raw_extras_converter`, which
together turn a start with more than one argument into a typed failure instead of a workflow
task that fails forever.

This module imports nothing on purpose: the workflow sandbox executes it afresh for every
workflow run (a workflow module's package is imported with it), so whatever it imported would
be paid on every run. Every other module of the package is a deterministic helper passed
through the sandbox (see `crux.plugin.PASSTHROUGH_MODULES`); only the three workflow modules
are executed in it per run.
"""
