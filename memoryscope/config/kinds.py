"""Which registry answers for each kind of `class:` in a config."""

from __future__ import annotations

from typing import Any

from memoryscope.registry import Registry

__all__ = ["registry_for"]


def registry_for(kind: str) -> Registry[Any]:
    # Imported here: each registry's module pulls in its base classes, which import the config.
    from memoryscope.chat.base import CHATS
    from memoryscope.operation import OPERATIONS
    from memoryscope.service import SERVICES
    from memoryscope.stores.base import STORES
    from memoryscope.worker import WORKERS

    registries: dict[str, Registry[Any]] = {
        "worker": WORKERS,
        "memory store": STORES,
        "memory service": SERVICES,
        "operation class": OPERATIONS,
        "chat": CHATS,
    }
    return registries[kind]
