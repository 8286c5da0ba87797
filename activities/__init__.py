"""Thin Temporal activities over `providers/` and `storage/`."""

from activities._errors import to_application_error
from activities._implements import activity_name, implementations, implements
from activities._providers import ProviderRegistry
from activities._reply import stored_output
from activities.cleanup import StagingCleanup
from activities.generation import GenerationActivities
from vocabulary.ids import assistant_message_id, user_message_id

__all__ = [
    "GenerationActivities",
    "ProviderRegistry",
    "StagingCleanup",
    "activity_name",
    "assistant_message_id",
    "implementations",
    "implements",
    "stored_output",
    "to_application_error",
    "user_message_id",
]
