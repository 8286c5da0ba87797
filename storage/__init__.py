"""PostgreSQL storage: Threads, derived artifacts, generation staging and receipts."""

from storage._pool import create_pool
from storage.generations import GenerationStore, StagedMessage
from storage.migrate import available_migrations, migrate, migrate_url

__all__ = [
    "GenerationStore",
    "StagedMessage",
    "available_migrations",
    "create_pool",
    "migrate",
    "migrate_url",
]
