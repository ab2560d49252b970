"""One registry per kind of pluggable part: models, model backends, stores, workers, chats.

A registry is the only list of names for its kind. Built-in parts register themselves with a
decorator in their own module; the registry imports its package's modules the first time a name
is looked up (`discover`), so nothing is listed twice and heavy libraries are imported only by
the modules that need them, when they are used. A `class:` that contains a dot is an import
path to user code (`my_pkg.my_module.MyWorker`) and is checked against the kind's base class.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from memoryscope.errors import ConfigError, UnknownNameError

__all__ = ["Registry", "import_object"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Names → classes of one kind, filled by `register` and by importing `packages`."""

    def __init__(self, kind: str, base: type | None = None, packages: tuple[str, ...] = ()):
        self.kind = kind
        self.base = base
        self._packages = packages
        self._entries: dict[str, T] = {}
        self._discovered = not packages
        self._lock = threading.RLock()

    def register(self, name: str) -> Callable[[T], T]:
        """Class decorator: make `name` resolve to the decorated class."""

        def decorate(obj: T) -> T:
            with self._lock:
                existing = self._entries.get(name)
                if existing is not None and existing is not obj:
                    raise ConfigError(f"{self.kind} name {name!r} is registered twice: {existing!r} and {obj!r}")
                self._entries[name] = obj
            return obj

        return decorate

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._entries)

    def get(self, name: str, where: str = "") -> T:
        """The entry called `name`, or an import path; `where` is the YAML path for errors."""
        self.discover()
        entry = self._entries.get(name)
        if entry is not None:
            return entry
        if "." in name:
            obj = import_object(name, where)
            if self.base is not None and not (isinstance(obj, type) and issubclass(obj, self.base)):
                raise ConfigError([(where, f"{name!r} is not a {self.kind} (expected a subclass of {self.base.__name__})")])
            return obj  # type: ignore[return-value]  # checked against the base class just above
        raise UnknownNameError(where, self.kind, name, self._entries)

    def __contains__(self, name: str) -> bool:
        self.discover()
        return name in self._entries

    def discover(self) -> None:
        """Import every module of the registry's packages once, so their decorators run."""
        if self._discovered:
            return
        with self._lock:
            if self._discovered:
                return
            for package_name in self._packages:
                package = importlib.import_module(package_name)
                for info in pkgutil.iter_modules(package.__path__):
                    if not info.name.startswith("_"):
                        importlib.import_module(f"{package_name}.{info.name}")
            self._discovered = True


def import_object(path: str, where: str = "") -> object:
    """Import `package.module.Name` (or `package.module:Name`) with an error naming `where`."""
    module_name, _, attribute = path.replace(":", ".").rpartition(".")
    if not module_name:
        raise ConfigError([(where, f"{path!r} is not an import path (expected package.module.Name)")])
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError([(where, f"cannot import {module_name!r} for {path!r}: {error}")]) from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ConfigError([(where, f"module {module_name!r} has no {attribute!r}")]) from None
