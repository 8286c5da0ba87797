"""The shapes that cross Temporal: the generation's input and result, activity payloads.

Sits directly above the planner (payloads embed planner shapes such as receipts and
contributors) and below storage, providers, activities and workflows. Import its modules
directly; this package exports nothing itself.
"""
