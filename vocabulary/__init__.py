"""The words every layer speaks: errors, messages, ids, stages and the error-detail codec.

The leaf of the import graph: it imports the standard library and pydantic only, so the
planner, storage, providers, activities, workflows and the `crux` facade can all depend on
it, and the workflow sandbox can load it without pulling any I/O library in. Import its
modules directly; this package exports nothing itself.
"""
