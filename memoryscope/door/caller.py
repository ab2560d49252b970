"""Who calls a verb: the user whose memories it works on, and what the caller may reach.

Every face makes one `Caller` per call (from its own inputs: a path, a flag, an MCP header, an
API key) and hands it to the verb; the verb never asks again who the user is. The door reads and
writes memories through `Caller.memory_filter`, so the store itself applies the user scope: a
memory id of another user is not found, for every face alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from memoryscope.errors import InvalidInputError, PermissionDeniedError
from memoryscope.memory import MemoryStatus, MemoryType
from memoryscope.stores.base import MemoryFilter

__all__ = ["Caller", "Reach", "READ", "WRITE", "ADMIN", "MAX_NAME_CHARS"]

READ, WRITE, ADMIN = "read", "write", "admin"
MAX_NAME_CHARS = 256  # a user id, workspace or target name


@dataclass(frozen=True)
class Reach:
    """The other users a caller may reach by memory id (an API key scoped to users or workspaces,
    or a local process that owns the whole store). `None` means any."""

    users: frozenset[str] | None = None
    workspaces: frozenset[str] | None = None

    def permits(self, user_id: str, workspace: str) -> bool:
        if self.users is not None and user_id not in self.users:
            return False
        return self.workspaces is None or workspace in self.workspaces


EVERYONE = Reach()


@dataclass(frozen=True)
class Caller:
    """The typed caller every verb takes.

    `user_id`: whose memories; `named`: whether the face named that user (False: the config's
    default user, which `delete_all` refuses); `workspace` and `target`: the isolation key beside
    the user ("" is none). None is "any": `search`, `get_all`, `delete_all` (and the reads that
    list, such as `profile`) cover the user's memories of every workspace (`workspace=None`) or
    every target (`target=None`), and by memory id `workspace=None` reaches any workspace of the
    user; a write (`add`, `run`) needs both given (`write_target`, `write_workspace` are what a
    write of another verb's run carries: "" for None). `agent_id` and `run_id`: where a face has
    them (an assistant's id, a caller's own run); `scopes`: read, write, admin; `reach`: by memory
    id, which other users' memories this caller may touch (None: only `user_id`'s).
    """

    user_id: str
    workspace: str | None = ""
    target: str | None = ""
    agent_id: str = ""
    run_id: str = ""
    scopes: frozenset[str] = field(default_factory=lambda: frozenset((READ, WRITE)))
    named: bool = True
    reach: Reach | None = None

    def __post_init__(self) -> None:
        for what, value in (("user_id", self.user_id), ("target", self.target or ""), ("workspace", self.workspace or "")):
            if not isinstance(value, str):
                raise InvalidInputError(f"{what} must be a text, got {type(value).__name__}")
            if len(value) > MAX_NAME_CHARS:
                raise InvalidInputError(f"{what} has {len(value)} characters; at most {MAX_NAME_CHARS}")
        if not self.user_id.strip():
            raise InvalidInputError("user_id is empty; give the user's id, or leave it out for the default user")
        object.__setattr__(self, "scopes", frozenset(self.scopes))

    @classmethod
    def local(cls, user_id: str, *, named: bool, workspace: str | None = "", target: str | None = "") -> Caller:
        """A caller in this process (Python, the command line): it owns the store, so by memory id
        it reaches every user's memories unless it named a user."""
        scopes = frozenset((READ, WRITE, ADMIN))
        return cls(user_id, workspace, target, scopes=scopes, named=named, reach=None if named else EVERYONE)

    def require(self, scope: str, verb: str) -> None:
        """PermissionDeniedError unless this caller holds `scope` (admin holds every scope)."""
        if scope not in self.scopes and ADMIN not in self.scopes:
            raise PermissionDeniedError(f"{verb} needs the {scope!r} scope; this caller has {', '.join(sorted(self.scopes))}")

    def for_user(self, user_id: str, workspace: str | None) -> Caller:
        """The same caller acting on another user it reaches (a memory found by id)."""
        return replace(self, user_id=user_id, workspace=workspace, reach=None)

    @property
    def write_workspace(self) -> str:
        return self.workspace or ""

    @property
    def write_target(self) -> str:
        return self.target or ""

    @property
    def widened(self) -> bool:
        """Whether this caller reads any target or any workspace of its user (see the class)."""
        return self.target is None or self.workspace is None

    def require_exact(self, verb: str) -> None:
        """InvalidInputError unless this caller names one target and one workspace: what a write needs."""
        if self.widened:
            given = (("target", self.target), ("workspace", self.workspace))
            missing = " and ".join(what for what, value in given if value is None)
            raise InvalidInputError(
                f"{verb} writes the memories of one target and one workspace: give the {missing} "
                '("" for none); only the reads (search, get_all) and delete_all take any'
            )

    def covers(self, target_name: str, workspace: str) -> bool:
        """Whether a memory of the caller's user in this target and workspace is in the caller's reach."""
        return (self.target is None or target_name == self.target) and (self.workspace is None or workspace == self.workspace)

    def memory_filter(
        self,
        *,
        memory_types: tuple[MemoryType, ...] | None = None,
        status: MemoryStatus | None = MemoryStatus.VALID,
        memory_ids: tuple[str, ...] | None = None,
        any_target: bool = False,
        **narrowing: object,
    ) -> MemoryFilter:
        """The store filter of this caller's memories (further narrowed as asked)."""
        return MemoryFilter(
            user_name=self.user_id,
            target_name=None if any_target else self.target,  # None: any target too
            workspace=self.workspace,
            memory_types=memory_types,
            status=status,
            memory_ids=memory_ids,
            **narrowing,  # type: ignore[arg-type]  # the remaining MemoryFilter fields, checked by its constructor
        )
