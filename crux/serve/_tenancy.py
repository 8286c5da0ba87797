"""Tenant scopes: every Thread, generation, staged input and receipt a tenant can address.

The API maps the caller's ids into its tenant's namespace before anything reaches storage
or Temporal: Thread `x` of tenant `acme` is stored as `t/acme/x`, and an ad-hoc generation
`g` as `t/acme/g` (a Thread's generations are scoped by their Thread already). Workflow ids,
staging keys, ledger rows and receipts all derive from these ids, so each of them starts
with the tenant's prefix, and another tenant's Thread cannot even be named: it answers
exactly as a Thread that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from crux.serve._auth import Tenant
from vocabulary.errors import ConfigurationError
from vocabulary.ids import (
    MAX_GENERATION_ID_LENGTH,
    MAX_SCOPE_ID_LENGTH,
    check_wire_id,
    encode_id_component,
    generation_key,
)

PREFIX = "t"
"""The first segment of every id the API stores."""


@dataclass(frozen=True)
class Scoped:
    """A generation's ids as stored: what a plain Temporal client passes to `start_workflow`.

    Attributes:
        generation_id: The stored generation id (prefixed for an ad-hoc generation).
        thread_id: The stored Thread id, `None` for an ad-hoc generation.
    """

    generation_id: str
    thread_id: str | None

    @property
    def key(self) -> str:
        """The generation's storage key (staging, ledger, receipts)."""
        return generation_key(self.generation_id, self.thread_id)


class TenantScope:
    """The ids of one tenant.

    Args:
        tenant: The authenticated tenant.
    """

    def __init__(self, tenant: Tenant) -> None:
        self.tenant = tenant
        self._prefix = f"{PREFIX}/{tenant.id}/"
        # Every storage key of this tenant starts so: Thread keys encode the Thread id,
        # ad-hoc keys the prefixed generation id.
        self._key_prefix = encode_id_component(self._prefix)

    def thread(self, thread_id: str) -> str:
        """The stored id of the caller's Thread `thread_id`.

        Raises:
            ConfigurationError: Not a usable Thread id (empty, too long, control characters).
        """
        check_wire_id(thread_id, "thread_id", limit=MAX_SCOPE_ID_LENGTH - len(self._prefix))
        return self._prefix + thread_id

    def external_thread(self, stored: str | None) -> str | None:
        """The caller's id of a stored Thread id of this tenant."""
        if stored is None:
            return None
        if not stored.startswith(self._prefix):
            raise ConfigurationError("a Thread outside the caller's scope")
        return stored.removeprefix(self._prefix)

    def generation(self, generation_id: str, thread_id: str | None) -> Scoped:
        """The stored ids of the caller's generation (on its Thread, or ad hoc).

        Raises:
            ConfigurationError: Not a usable generation or Thread id.
        """
        if thread_id is not None:
            check_wire_id(generation_id, "generation_id", limit=MAX_GENERATION_ID_LENGTH)
            return Scoped(generation_id=generation_id, thread_id=self.thread(thread_id))
        check_wire_id(
            generation_id, "generation_id", limit=MAX_GENERATION_ID_LENGTH - len(self._prefix)
        )
        return Scoped(generation_id=self._prefix + generation_id, thread_id=None)

    def external_generation(self, stored: str, thread_id: str | None) -> str:
        """The caller's id of a stored generation id (ad-hoc ids lose their prefix)."""
        return stored if thread_id is not None else stored.removeprefix(self._prefix)

    def owns_key(self, key: str | None) -> bool:
        """Whether a storage key (a receipt's generation) lies in this tenant's scope."""
        return key is not None and key.startswith(self._key_prefix)
