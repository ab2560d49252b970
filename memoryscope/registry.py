"""One registry per kind of pluggable part: models, model backends, stores, workers, chats.

A registry is the only list of names for its kind. Built-in parts register themselves with a
decorator in their own module; the registry imports its package's modules the first time a name
is looked up (`discover`), so nothing is listed twice and heavy libraries are imported only by
the modules that need them, when they are used. A `class:` that contains a dot is an import
path to user code (`my_pkg.my_module.MyWorker`) and is checked against the kind's base class.

Other packages add parts through entry points, in a group named after the kind (`group_for`):

    kind                 group                              a config names it in
    worker               memoryscope.workers                worker.*.class, a workflow
    memory store         memoryscope.memory_stores          memory_store.class
    memory service       memoryscope.memory_services        memory_service.*.class
    operation class      memoryscope.operation_classes      memory_operations.*.class
    chat                 memoryscope.chats                  memory_chat.*.class
    generation backend   memoryscope.generation_backends    model.*.module_name
    embedding backend    memoryscope.embedding_backends     model.*.module_name
    rank backend         memoryscope.rank_backends          model.*.module_name

An entry point's value is either a class (`shout = "shout_worker:ShoutWorker"`: registered under
the entry point's name, which must be a plain name) or a module (`my_workers = "my_workers"`:
imported, and its `register_*` decorators register what it defines). The group is read once,
after the built-in packages, the first time a name is looked up.

A broken entry point never stops MemoryScope for a config that does not use it. Broken means:
it cannot be imported, it is not a subclass of the kind's base, its name is not a plain name
(letters, digits, `_`), or it takes a name already taken (built in, or by an earlier distribution
on `sys.path`: the first keeps the name). Such an entry point registers nothing, not even what
its module registered before failing, so a half-imported plugin is never half used. One warning
(logger `memoryscope.registry`) names the kind, the entry point, its distribution and what to
fix; asking for a name only it would have provided (its entry point name, or what its module
registered) is a `ConfigError` with the same text, at the YAML path that asked. `broken()`
lists them (`memoryscope workers` shows them).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import pkgutil
import re
import sys
import threading
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, Protocol, TypeVar

from memoryscope.errors import ConfigError, UnknownNameError

__all__ = ["Registry", "group_for", "import_object"]

T = TypeVar("T")

logger = logging.getLogger("memoryscope.registry")

# The names a workflow string accepts (`memoryscope.workflow.plan`), for every kind alike.
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def group_for(kind: str) -> str:
    """The entry point group of a registry kind: `worker` → `memoryscope.workers`,
    `memory store` → `memoryscope.memory_stores`, `operation class` → `memoryscope.operation_classes`."""
    words = kind.split()
    last = words[-1] + ("es" if words[-1].endswith(("s", "sh", "ch", "x")) else "s")
    return "memoryscope." + "_".join([*words[:-1], last])


class Registry(Generic[T]):
    """Names → classes of one kind, filled by `register`, by importing `packages` and by the
    entry points of `group` (default `group_for(kind)`)."""

    def __init__(self, kind: str, base: type | None = None, packages: tuple[str, ...] = (), group: str | None = None):
        self.kind = kind
        self.base = base
        self.group = group or group_for(kind)
        self._packages = packages
        self._entries: dict[str, T] = {}
        self._distributions: dict[str, str] = {}  # name → the distribution whose entry point registered it
        self._broken: dict[str, str] = {}  # name → why its entry point is not used
        self._discovered = False
        self._discovering = False
        self._lock = threading.RLock()

    def register(self, name: str) -> Callable[[T], T]:
        """Class decorator: make `name` resolve to the decorated class."""

        def decorate(obj: T) -> T:
            with self._lock:
                existing = self._entries.get(name)
                if existing is not None and existing is not obj:
                    raise ConfigError(f"{self.kind} name {name!r} is registered twice: {self.origin(name)} and {_qualified(obj)}")
                self._entries[name] = obj
            return obj

        return decorate

    def names(self) -> list[str]:
        """Every usable name, sorted (the names of broken entry points are not among them)."""
        self.discover()
        return sorted(self._entries)

    def get(self, name: str, where: str = "") -> T:
        """The entry called `name`, or an import path; `where` is the YAML path for errors."""
        self.discover()
        entry = self._entries.get(name)
        if entry is not None:
            return entry
        problem = self._broken.get(name)
        if problem is not None:
            raise ConfigError([(where, problem)])
        if "." in name:
            obj = import_object(name, where)
            if self.base is not None and not (isinstance(obj, type) and issubclass(obj, self.base)):
                raise ConfigError([(where, f"{name!r} is not a {self.kind} (expected a subclass of {self.base.__name__})")])
            return obj  # type: ignore[return-value]  # checked against the base class just above
        raise UnknownNameError(where, self.kind, name, self._entries)

    def __contains__(self, name: str) -> bool:
        self.discover()
        return name in self._entries

    def distribution(self, name: str) -> str | None:
        """`name version` of the installed distribution whose entry point registered `name`;
        None for a part registered by an import (built in, or user code)."""
        self.discover()
        return self._distributions.get(name)

    def origin(self, name: str) -> str:
        """Where `name` comes from, for people: the class, and its distribution or `built in`."""
        obj = self._entries[name]
        distribution = self._distributions.get(name)
        if distribution is not None:
            return f"{_qualified(obj)} (from {distribution})"
        module = getattr(obj, "__module__", "")
        built_in = any(module == package or module.startswith(f"{package}.") for package in self._packages)
        return f"{_qualified(obj)} ({'built in' if built_in else 'registered by ' + module})"

    def broken(self) -> dict[str, str]:
        """Name → problem, for each entry point of `group` that could not be used."""
        self.discover()
        return dict(self._broken)

    def discover(self) -> None:
        """Import every module of the registry's packages once, so their decorators run; then
        load the entry points of `group`."""
        if self._discovered:
            return
        with self._lock:
            # `_discovering`: a module imported below that looks a name up sees what is registered so far
            if self._discovered or self._discovering:
                return
            self._discovering = True
            try:
                for package_name in self._packages:
                    package = importlib.import_module(package_name)
                    for info in pkgutil.iter_modules(package.__path__):
                        if not info.name.startswith("_"):
                            importlib.import_module(f"{package_name}.{info.name}")
                for entry_point in _entry_points(self.group):
                    self._load(entry_point)
                self._discovered = True
            finally:
                self._discovering = False

    def _load(self, entry_point: EntryPoint) -> None:
        """Register what one entry point provides, or nothing (and say why)."""
        distribution, version = _distribution(entry_point)
        before = dict(self._entries)
        problem, fix = self._try_register(entry_point)
        added = [name for name in self._entries if name not in before]
        if problem:
            self._entries = before  # nothing of a broken plugin stays half registered
            label = f"{self.kind} entry point `{entry_point.name} = {entry_point.value}` of {distribution} {version}".rstrip()
            message = f"{label} (group {self.group}) {problem}; {fix.format(distribution=distribution)}"
            for name in dict.fromkeys([entry_point.name, *added]):
                self._broken.setdefault(name, message)
            logger.warning("%s. This entry point is ignored.", message)
            return
        for name in added:
            self._distributions[name] = f"{distribution} {version}".rstrip()

    def _try_register(self, entry_point: EntryPoint) -> tuple[str, str]:
        """Register what an entry point provides; ("", "") or (what is wrong, what to do)."""
        uninstall = "fix it or uninstall it (pip uninstall {distribution})"
        try:
            obj = entry_point.load()
        except ConfigError as error:  # a `register_*` decorator in the imported module refused a name
            return f"cannot be used: {error}", "rename it in {distribution}, or uninstall it (pip uninstall {distribution})"
        except Exception as error:  # a plugin may fail in any way; it must not stop configs that do not use it
            return f"cannot be loaded: {type(error).__name__}: {error}", uninstall
        if entry_point.attr is None:  # a module: its decorators did the registering
            return "", ""
        if not _PLAIN_NAME.fullmatch(entry_point.name):
            return "has a name a config cannot use (letters, digits and '_' only)", "rename it in {distribution}"
        if not isinstance(obj, type) or (self.base is not None and not issubclass(obj, self.base)):
            expected = f"a subclass of {self.base.__name__}" if self.base is not None else "a class"
            return f"is not a {self.kind} (expected {expected}, got {_qualified(obj)})", uninstall
        existing = self._entries.get(entry_point.name)
        if existing is not None and existing is not obj:
            taken = f"takes the name {entry_point.name!r}, which is already {self.origin(entry_point.name)}"
            return taken, "rename the entry point in {distribution} (a dotted `class:` path reaches the class meanwhile)"
        self._entries[entry_point.name] = obj  # type: ignore[assignment]  # checked against the base class above
        return "", ""


def _entry_points(group: str) -> list[EntryPoint]:
    try:
        return list(_installed_entry_points().select(group=group))
    except Exception as error:  # unreadable metadata of one distribution must not stop MemoryScope
        logger.warning("cannot read the entry points of group %s: %s: %s", group, type(error).__name__, error)
        return []


class _EntryPointGroups(Protocol):
    """What `importlib.metadata.entry_points()` returns: groups apart (Python 3.10-3.11) or one list."""

    def select(self, *, group: str) -> Iterable[EntryPoint]: ...


def _installed_entry_points() -> _EntryPointGroups:
    """Every installed entry point. One read walks every distribution's metadata (~10 ms here)
    and a config's first check makes up to eight, one per registry: so it is read once, and again
    when a folder on `sys.path` was added, removed or changed (a distribution installed since)."""
    return _entry_points_of(tuple((folder, _modified_ns(folder)) for folder in sys.path))


@functools.lru_cache(maxsize=1)
def _entry_points_of(folders: tuple[tuple[str, int], ...]) -> _EntryPointGroups:
    del folders  # only the cache's key
    return entry_points()


def _modified_ns(folder: str) -> int:
    try:
        return os.stat(folder or ".").st_mtime_ns
    except OSError:
        return -1


def _distribution(entry_point: EntryPoint) -> tuple[str, str]:
    """(name, version) of the distribution that declares `entry_point`."""
    dist = entry_point.dist
    return (dist.name, dist.version) if dist is not None else ("(unknown distribution)", "")


def _qualified(obj: object) -> str:
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or type(obj).__name__
    return f"{module}.{name}" if module else name


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
