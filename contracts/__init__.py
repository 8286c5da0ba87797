"""The shapes that cross Temporal: the generation's input and result, activity payloads.

Sits directly above the planner (payloads embed planner shapes such as receipts and
contributors) and below storage, providers, activities and workflows. Beside the shapes are
the pure functions both sides of Temporal apply to them: input decoding (`decoding`), the
planner request of a generation step (`planning`), the search attributes (`search`) and the
static summary of a run (`ui`). Import its modules directly; this package exports nothing
itself.
"""
