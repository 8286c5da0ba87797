"""An in-memory reference model of one Thread, for differential tests against PostgreSQL.

It follows the documented semantics of `storage.threads` (including its recorded deviations)
with plain dictionaries, and renders every result in a comparable, timestamp-free form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Outcome = tuple[str, Any]
"""`("ok", value)` or `("error", code)`."""

MAIN = "main"


class ModelError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class ModelNode:
    id: str
    parent: str | None
    group_id: str
    seq: int
    group_end: bool
    depth: int
    version: int
    role: str
    identity: tuple[str, str]
    state: str = "live"
    edit_of: str | None = None


@dataclass
class ModelGroup:
    message_ids: list[str]
    parent: str | None
    status: str
    selected_head: str
    edit_of: str | None = None


@dataclass
class ModelThread:
    state: str = "absent"
    version: int = 0
    heads: dict[str, str] = field(default_factory=dict[str, str])
    nodes: dict[str, ModelNode] = field(default_factory=dict[str, ModelNode])
    groups: dict[str, ModelGroup] = field(default_factory=dict[str, ModelGroup])
    leaves: dict[str, str] = field(default_factory=dict[str, str])
    tokens: dict[str, int] = field(default_factory=dict[str, int])

    # -- helpers ---------------------------------------------------------------------------

    @property
    def revision(self) -> str:
        return f"r{self.version}"

    def _live(self) -> None:
        if self.state == "absent":
            raise ModelError("not_found")
        if self.state == "deleted":
            raise ModelError("deleted")

    def _path(self, head: str) -> list[ModelNode]:
        path: list[ModelNode] = []
        current: str | None = head
        while current is not None:
            node = self.nodes[current]
            path.append(node)
            current = node.parent
        return path[::-1]

    @staticmethod
    def _on_path(path: list[ModelNode], target: ModelNode) -> bool:
        return target.depth < len(path) and path[target.depth].id == target.id

    def _receipt(self, group: ModelGroup, replayed: bool) -> tuple[Any, ...]:
        return (group.status, tuple(group.message_ids), group.parent, group.selected_head, replayed)

    def _insert(
        self,
        batch: list[tuple[str, str, str]],
        parent: ModelNode | None,
        status: str,
        selected_head: str,
        edit_of: str | None = None,
    ) -> ModelGroup:
        first = batch[0][0]
        previous = parent.id if parent else None
        depth = parent.depth + 1 if parent else 0
        for seq, (message_id, role, text) in enumerate(batch):
            self.nodes[message_id] = ModelNode(
                id=message_id,
                parent=previous,
                group_id=first,
                seq=seq,
                group_end=seq == len(batch) - 1,
                depth=depth + seq,
                version=self.version + 1,
                role=role,
                identity=(role, text),
                edit_of=edit_of,
            )
            previous = message_id
        group = ModelGroup(
            message_ids=[item[0] for item in batch],
            parent=parent.id if parent else None,
            status=status,
            selected_head=selected_head,
            edit_of=edit_of,
        )
        self.groups[first] = group
        return group

    # -- operations ------------------------------------------------------------------------

    def append(
        self, batch: list[tuple[str, str, str]], *, explicit: bool, parent_id: str | None
    ) -> tuple[Any, ...]:
        ids = [item[0] for item in batch]
        if len(set(ids)) != len(ids):
            raise ModelError("identity_conflict")
        if self.state == "deleted":
            raise ModelError("deleted")
        existing = [self.nodes[i] for i in ids if i in self.nodes]
        if any(node.state == "redacted" for node in existing):
            raise ModelError("redacted")
        if existing:
            if len(existing) != len(ids):
                raise ModelError("identity_conflict")
            group = self.groups[existing[0].group_id]
            if group.message_ids != ids or group.edit_of is not None:
                raise ModelError("identity_conflict")
            for message_id, role, text in batch:
                if self.nodes[message_id].identity != (role, text):
                    raise ModelError("identity_conflict")
            if explicit and group.parent != parent_id:
                raise ModelError("identity_conflict")
            return self._receipt(group, True)
        head = self.heads.get(MAIN)
        target = parent_id if explicit else head
        parent = None
        if target is not None:
            parent = self.nodes.get(target)
            if parent is None:
                raise ModelError("not_found")
            if not parent.group_end:
                raise ModelError("invalid_group")
        leaf = ids[-1]
        selected = head is None or head == target
        status = "selected" if selected else "alternative"
        selected_head = head if head is not None and not selected else leaf
        group = self._insert(batch, parent, status, selected_head)
        advanced = 0
        if target is not None:
            for start, tip in list(self.leaves.items()):
                if tip == target:
                    self.leaves[start] = leaf
                    advanced += 1
        if not selected and advanced == 0:
            self.leaves[ids[0]] = leaf
        if selected:
            self.heads[MAIN] = leaf
        self.state = "live"
        self.version += 1
        return self._receipt(group, False)

    def edit(self, target_id: str, text: str, new_id: str) -> tuple[Any, ...]:
        self._live()
        target = self.nodes.get(target_id)
        if target is None:
            raise ModelError("not_found")
        if target.state == "redacted":
            raise ModelError("redacted")
        existing = self.nodes.get(new_id)
        if existing is not None:
            if existing.state == "redacted":
                raise ModelError("redacted")
            group = self.groups[existing.group_id]
            if (
                existing.edit_of == target_id
                and existing.identity == ("user", text)
                and group.message_ids == [new_id]
            ):
                return self._receipt(group, True)
            raise ModelError("identity_conflict")
        if not (
            target.state == "live"
            and target.role == "user"
            and target.seq == 0
            and target.group_end
        ):
            raise ModelError("invalid_group")
        head = self.heads.get(MAIN)
        if head is None:
            raise ModelError("not_found")
        current = self._path(head)
        parent_path = self._path(target.parent) if target.parent else []
        shared = 0
        while (
            shared < len(current)
            and shared < len(parent_path)
            and current[shared].id == parent_path[shared].id
        ):
            shared += 1
        if shared < len(current):
            self.leaves[current[shared].id] = head
        if self._on_path(current, target):
            continuation = head
        else:
            continuation = target_id
            best: tuple[int, int] | None = None
            for start in sorted(self.leaves):
                path = self._path(self.leaves[start])
                if not self._on_path(path, target):
                    continue
                start_depth = next((n.depth for n in path if n.id == start), -1)
                candidate = (start_depth, len(path))
                if best is None or candidate > best:
                    best = candidate
                    continuation = self.leaves[start]
        self.leaves[target_id] = continuation
        parent = parent_path[-1] if parent_path else None
        group = self._insert(
            [(new_id, "user", text)], parent, "selected", new_id, edit_of=target_id
        )
        self.heads[MAIN] = new_id
        self.version += 1
        return self._receipt(group, False)

    def select(self, target_id: str) -> tuple[Any, ...]:
        self._live()
        target = self.nodes.get(target_id)
        if target is None:
            raise ModelError("not_found")
        head = self.heads.get(MAIN)
        if head is None:
            raise ModelError("not_found")
        current = self._path(head)
        if self._on_path(current, target):
            return self.read(at=head)
        sibling = current[target.depth] if target.depth < len(current) else None
        if target.seq != 0 or sibling is None or sibling.parent != target.parent:
            raise ModelError("invalid_group")
        leaf = self.leaves.get(target_id)
        if leaf is None:
            leaf = next(
                n.id for n in self.nodes.values() if n.group_id == target.group_id and n.group_end
            )
        self.leaves[sibling.id] = head
        self.heads[MAIN] = leaf
        self.version += 1
        return self.read(at=leaf)

    def redact(self, ids: list[str]) -> None:
        wanted = sorted(set(ids))
        if not wanted:
            raise ModelError("invalid_message")
        self._live()
        if any(i not in self.nodes for i in wanted):
            raise ModelError("not_found")
        fresh = [i for i in wanted if self.nodes[i].state != "redacted"]
        if not fresh:
            return
        for message_id in fresh:
            self.nodes[message_id].state = "redacted"
            self.tokens.pop(message_id, None)
        self.version += 1

    def remove(self, message_id: str) -> None:
        self._live()
        target = self.nodes.get(message_id)
        if target is None:
            raise ModelError("not_found")
        changed = 0
        for node in self.nodes.values():
            if node.group_id == target.group_id and node.state == "live":
                node.state = "removed"
                changed += 1
        if changed:
            self.version += 1

    def delete(self) -> None:
        if self.state == "deleted":
            return
        self.state = "deleted"
        self.heads = {}
        self.nodes = {}
        self.groups = {}
        self.leaves = {}
        self.tokens = {}
        self.version += 1

    def read(
        self, *, at: str | None = None, before: str | None = None, limit: int | None = None
    ) -> tuple[Any, ...]:
        if before is not None and limit is None:
            raise ModelError("invalid_group")
        if self.state == "absent":
            return ("r0", None, (), None)
        if self.state == "deleted":
            raise ModelError("deleted")
        head = at if at is not None else self.heads.get(MAIN)
        if head is None:
            return (self.revision, None, (), None)
        if head not in self.nodes:
            raise ModelError("not_found")
        path = self._path(head)
        if before is not None:
            index = next((i for i, n in enumerate(path) if n.id == before), None)
            if index is None:
                raise ModelError("not_found")
            if path[index].seq != 0:
                raise ModelError("invalid_group")
            path = path[:index]
        start = 0
        if limit is not None:
            taken = 0
            start = len(path)
            while start > 0:
                group_start = start - 1
                while group_start > 0 and path[group_start].seq != 0:
                    group_start -= 1
                size = start - group_start
                if taken and taken + size > limit:
                    break
                taken += size
                start = group_start
                if taken >= limit:
                    break
        page = path[start:]
        entries: list[tuple[Any, ...]] = []
        for node in page:
            if node.state == "redacted":
                entries.append(("redacted", node.id, node.parent))
            elif node.state == "removed":
                entries.append(("removed", node.id, node.parent))
            else:
                entries.append(
                    ("message", node.id, node.parent, node.identity, self._variant(node))
                )
        cursor = page[0].id if start > 0 and page else None
        return (self.revision, head, tuple(entries), cursor)

    def _variant(self, node: ModelNode) -> tuple[Any, ...] | None:
        if node.seq != 0:
            return None
        siblings = sorted(
            (n for n in self.nodes.values() if n.seq == 0 and n.parent == node.parent),
            key=lambda n: (n.version, n.id),
        )
        if len(siblings) < 2:
            return None
        order = [n.id for n in siblings]
        index = order.index(node.id)
        return (
            index,
            len(order),
            order[index - 1] if index > 0 else None,
            order[index + 1] if index + 1 < len(order) else None,
        )

    def store_tokens(self, counts: dict[str, int]) -> None:
        if not counts:
            return
        self._live()
        if any(i not in self.nodes for i in counts):
            raise ModelError("not_found")
        for message_id, value in counts.items():
            if self.nodes[message_id].state != "redacted":
                self.tokens[message_id] = value

    def history(self) -> tuple[Any, ...]:
        if self.state == "absent":
            return ("r0", None, ())
        if self.state == "deleted":
            raise ModelError("deleted")
        head = self.heads.get(MAIN)
        if head is None:
            return (self.revision, None, ())
        path = self._path(head)
        incomplete = {n.group_id for n in path if n.state != "live"}
        return (
            self.revision,
            head,
            tuple((n.id, self.tokens.get(n.id)) for n in path if n.group_id not in incomplete),
        )
