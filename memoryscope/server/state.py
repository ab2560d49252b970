"""What every request handler shares: the built scope, the settings, the keys; and who is calling.

`caller` is the dependency every `/v1` endpoint takes: it reads the API key (`Authorization:
Bearer KEY`, or `X-API-Key: KEY`), answers 401 for a missing or wrong one and 429 past the key's
rate, and returns a `Caller` whose `require(user, workspace)` answers 403 outside the key's scope.
Without any key configured (a loopback server, or one started with `--insecure`) every caller
may do everything.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from memoryscope.app import MemoryScope
from memoryscope.config.server_settings import ServerSettings
from memoryscope.door import ADMIN, READ, WRITE, Door, Limits, Reach
from memoryscope.door import Caller as VerbCaller
from memoryscope.server.accepted_writes import AcceptedWrites
from memoryscope.server.access import ApiKey, KeyRing
from memoryscope.server.errors import ApiError
from memoryscope.server.limits import RateLimiter
from memoryscope.server.metrics import ServerMetrics
from memoryscope.service import MemoryService

__all__ = ["Caller", "CallerDep", "AdminDep", "ServerState", "caller", "state_of", "admin_caller", "VerbCaller"]


@dataclass
class ServerState:
    scope: MemoryScope
    settings: ServerSettings
    keys: KeyRing
    limiter: RateLimiter
    metrics: ServerMetrics
    service: MemoryService
    chat: Any | None  # the memory chat behind /v1/chat/completions; None when the config has none
    started: float = field(default_factory=time.monotonic)
    accepted: AcceptedWrites = field(default_factory=AcceptedWrites)  # writes answered 202, done in the background

    @property
    def door(self) -> Door:
        """The verbs, with this server's limits (its `server:` settings)."""
        door = self.__dict__.get("_door")
        if door is None:
            door = self.__dict__["_door"] = self.scope.door.with_limits(Limits.of(self.settings))
        return door


def state_of(request: Request) -> ServerState:
    state = request.app.state.memoryscope
    if not isinstance(state, ServerState):
        raise RuntimeError("the app was not made by memoryscope.server.app.create_app")
    return state


@dataclass(frozen=True)
class Caller:
    """Who is calling: their key (None when the server asks for none) and what it may reach."""

    key: ApiKey | None

    @property
    def name(self) -> str:
        return self.key.name if self.key is not None else "anonymous"

    @property
    def admin(self) -> bool:
        return self.key is None or self.key.admin

    def permits(self, user: str, workspace: str | None = "") -> bool:
        return self.key is None or self.key.permits(user, workspace)

    def require(self, user: str, workspace: str | None = "") -> None:
        """403 unless this caller's key reaches `user` in `workspace` (None: in every workspace)."""
        if not self.permits(user, workspace):
            if workspace is None and self.key is not None and self.key.workspaces:
                raise ApiError(
                    403, "forbidden", f"the API key {self.name!r} reaches only the workspaces {sorted(self.key.workspaces)}: "
                    "name one (the workspace, or mem0's run_id) to read or delete in it"
                )  # fmt: skip
            where = f" in workspace {workspace!r}" if workspace else ""
            raise ApiError(
                403, "forbidden", f"the API key {self.name!r} may not reach user {user!r}{where}; use a key scoped to them"
            )

    def for_user(
        self,
        state: ServerState,
        named: str | None,
        workspace: str | None = "",
        target: str | None = "",
        *,
        default_user: bool = False,
    ) -> VerbCaller:
        """The verbs' caller of this request: the user it names (a path, the `user` field, the
        X-MemoryScope-User header), else the one user its key is scoped to, else, where the face
        allows it and no keys are configured, the service's `human_name`; 422 when none, 403 when
        the key does not reach them. The one place an HTTP face decides who the user is.
        `workspace`/`target` None: the reads cover any (`memoryscope.door.Caller`); 403 for a key
        scoped to workspaces, which reaches no other."""
        user = (named or "").strip() or self.sole_user()
        if not user and default_user and self.key is None:
            user = state.service.params.human_name
        if not user:
            message = "name whose memories to use: the path's user, the request's `user` field, or the X-MemoryScope-User header"
            raise ApiError(422, "missing_user", message)
        self.require(user, workspace)
        return VerbCaller(user, workspace, target, scopes=self.scopes)

    def by_id(self, state: ServerState) -> VerbCaller:
        """The verbs' caller for a memory or run named by id: it reaches what the key reaches."""
        key = self.key
        reach = Reach() if key is None or key.admin else Reach(key.users or None, key.workspaces or None)
        return VerbCaller(state.service.params.human_name, None, scopes=self.scopes, named=False, reach=reach)

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset((READ, WRITE, ADMIN)) if self.admin else frozenset((READ, WRITE))

    def sole_user(self) -> str | None:
        """The one user this caller's key is scoped to, if exactly one."""
        if self.key is not None and not self.key.admin and len(self.key.users) == 1:
            return next(iter(self.key.users))
        return None


def presented_key(request: Request) -> str | None:
    authorization = request.headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    given = request.headers.get("x-api-key", "").strip()
    return given or None


def caller(request: Request) -> Caller:
    """The calling key, checked: 401 without a valid one (when keys are configured), 429 past its rate."""
    state = state_of(request)
    if not state.keys:
        request.state.shows_detail = True  # no keys: whoever calls runs the server (see errors.for_caller)
        return Caller(None)
    key = state.keys.authenticate(presented_key(request))
    if key is None:
        # failed attempts share a rate per client address, so keys cannot be guessed at full speed
        client = request.client.host if request.client is not None else "unknown"
        _check_rate(state, f"\x00unauthenticated {client}", f"requests without a valid key from {client} are")
        message = "a valid API key is required: send `Authorization: Bearer KEY` (or `X-API-Key: KEY`)"
        raise ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})
    _check_rate(state, key.name, f"the API key {key.name!r} is")
    request.state.key_name = key.name
    request.state.shows_detail = key.admin
    return Caller(key)


def _check_rate(state: ServerState, bucket: str, who_is: str) -> None:
    """429 with Retry-After when `bucket` is over the per-key rate; `who_is` begins the message."""
    wait_s = state.limiter.check(bucket)
    if wait_s is not None:
        seconds = max(1, int(wait_s + 0.999))
        message = f"{who_is} over the rate ({state.settings.rate_limit_per_minute}/minute); retry in {seconds} s"
        raise ApiError(429, "rate_limited", message, headers={"Retry-After": str(seconds)})


def admin_caller(request: Request) -> Caller:
    """The calling key, which must be an admin key (403 otherwise)."""
    who = caller(request)
    if not who.admin:
        raise ApiError(403, "forbidden", f"the API key {who.name!r} is not an admin key; this endpoint needs `admin: true`")
    return who


async def _caller_dependency(request: Request) -> Caller:
    # async: it never blocks (a digest and a rate check), so FastAPI runs it on the event loop
    # instead of sending it to a worker thread (a hop of its own before every endpoint)
    return caller(request)


async def _admin_dependency(request: Request) -> Caller:
    return admin_caller(request)


CallerDep = Annotated[Caller, Depends(_caller_dependency)]  # an endpoint's `who: CallerDep`: the checked caller
AdminDep = Annotated[Caller, Depends(_admin_dependency)]  # the same, for admin-only endpoints
