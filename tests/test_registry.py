"""Registries: one list of names per kind, lazy discovery, dotted paths to user code."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope.errors import ConfigError, UnknownNameError
from memoryscope.models.base import EMBEDDING_BACKENDS, GENERATION_BACKENDS, RANK_BACKENDS
from memoryscope.registry import Registry
from memoryscope.stores.base import STORES
from memoryscope.worker import WORKERS


class Base:
    pass


def test_builtin_names_are_discovered_from_their_packages() -> None:
    assert {"set_query", "extract_time", "retrieve_memory", "semantic_rank", "fuse_rerank"} <= set(WORKERS.names())
    assert {"openai_like", "openai", "dashscope"} <= set(GENERATION_BACKENDS.names())
    assert {"bge_embedding", "local_embedding"} <= set(EMBEDDING_BACKENDS.names())
    assert {"bge_rank", "dashscope_rank", "fusion_rank"} <= set(RANK_BACKENDS.names())
    assert {"sqlite_memory_store", "elasticsearch_memory_store"} <= set(STORES.names())


def test_unknown_name_lists_known_ones_and_the_closest() -> None:
    registry: Registry[type[Base]] = Registry("widget", Base)
    registry.register("blue_widget")(type("BlueWidget", (Base,), {}))
    with pytest.raises(UnknownNameError) as caught:
        registry.get("blu_widget", "widgets.a.class")
    assert str(caught.value) == "widgets.a.class: unknown widget 'blu_widget'. Did you mean 'blue_widget'? Known: blue_widget"


def test_the_same_name_cannot_mean_two_classes() -> None:
    registry: Registry[type[Base]] = Registry("widget", Base)
    registry.register("w")(type("One", (Base,), {}))
    with pytest.raises(ConfigError, match="registered twice"):
        registry.register("w")(type("Two", (Base,), {}))


def test_dotted_paths_import_user_classes_checked_against_the_base() -> None:
    registry: Registry[type[Base]] = Registry("widget", Base)
    assert registry.get(f"{__name__}.Base") is Base
    with pytest.raises(ConfigError, match="is not a widget"):
        registry.get("collections.OrderedDict", "w.class")
    with pytest.raises(ConfigError, match="cannot import 'no_such_module'"):
        registry.get("no_such_module.Thing", "w.class")
    with pytest.raises(ConfigError, match="has no 'Nope'"):
        registry.get(f"{__name__}.Nope", "w.class")


# -- entry points ------------------------------------------------------------------------------
# Each test installs its own distributions (a `*.dist-info` directory and modules on sys.path, as
# pip lays them out) for its own group, so the registries of MemoryScope itself see none of them.

WIDGETS_MODULE = """
from memoryscope.registry import Registry

class Widget:
    pass

WIDGETS = Registry("widget", Widget, packages=({builtin!r},), group={group!r})
"""

BUILTIN_PACKAGE = """
from {widgets} import WIDGETS, Widget

@WIDGETS.register("plain")
class PlainWidget(Widget):
    pass
"""


class Plugins:
    """Fake installed distributions in one directory on sys.path."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.tag = root.name.replace("-", "_").lower()
        self.group = f"memoryscope_test_{self.tag}.widgets"
        self.widgets = f"widgets_{self.tag}"  # the module that holds the registry and its base class
        self.modules: list[str] = [self.widgets]
        builtin = f"builtin_widgets_{self.tag}"
        self.module(self.widgets, WIDGETS_MODULE.format(builtin=builtin, group=self.group))
        (root / builtin).mkdir()
        (root / builtin / "__init__.py").write_text("", encoding="utf-8")
        (root / builtin / "plain.py").write_text(BUILTIN_PACKAGE.format(widgets=self.widgets), encoding="utf-8")
        self.modules += [builtin, f"{builtin}.plain"]
        monkeypatch.syspath_prepend(str(root))

    def module(self, name: str, source: str) -> str:
        (self.root / f"{name}.py").write_text(source, encoding="utf-8")
        self.modules.append(name)
        return name

    def distribution(self, name: str, entries: dict[str, str]) -> None:
        info = self.root / f"{name.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
        lines = [f"[{self.group}]", *(f"{key} = {value}" for key, value in entries.items())]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def registry(self) -> Registry[type]:
        importlib.invalidate_caches()
        return importlib.import_module(self.widgets).WIDGETS


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Plugins]:
    made = Plugins(tmp_path, monkeypatch)
    yield made
    for name in made.modules:
        sys.modules.pop(name, None)


def test_every_kind_has_an_entry_point_group_named_after_it() -> None:
    from memoryscope.chat.base import CHATS
    from memoryscope.operation import OPERATIONS
    from memoryscope.service import SERVICES

    groups = {
        registry.kind: registry.group
        for registry in (WORKERS, STORES, SERVICES, OPERATIONS, CHATS, GENERATION_BACKENDS, EMBEDDING_BACKENDS, RANK_BACKENDS)
    }
    assert groups == {
        "worker": "memoryscope.workers",
        "memory store": "memoryscope.memory_stores",
        "memory service": "memoryscope.memory_services",
        "operation class": "memoryscope.operation_classes",
        "chat": "memoryscope.chats",
        "generation backend": "memoryscope.generation_backends",
        "embedding backend": "memoryscope.embedding_backends",
        "rank backend": "memoryscope.rank_backends",
    }


def test_entry_points_register_a_class_by_name_or_a_module_by_its_decorators(plugins: Plugins) -> None:
    """Read lazily, once, after the built-in package; each name knows its distribution."""
    plugins.module(f"round_{plugins.tag}", f"from {plugins.widgets} import Widget\n\nclass RoundWidget(Widget):\n    pass\n")
    plugins.module(
        f"many_{plugins.tag}",
        f"from {plugins.widgets} import WIDGETS, Widget\n\n"
        '@WIDGETS.register("square")\nclass SquareWidget(Widget):\n    pass\n\n'
        '@WIDGETS.register("star")\nclass StarWidget(Widget):\n    pass\n',
    )
    plugins.distribution("round-widget", {"round": f"round_{plugins.tag}:RoundWidget"})
    plugins.distribution("many-widgets", {"many": f"many_{plugins.tag}"})
    registry = plugins.registry()
    assert f"round_{plugins.tag}" not in sys.modules  # nothing is read before a name is asked for

    assert registry.names() == ["plain", "round", "square", "star"]
    assert registry.get("round").__name__ == "RoundWidget"
    assert registry.distribution("round") == "round-widget 1.0"
    assert registry.distribution("star") == "many-widgets 1.0"
    assert registry.distribution("plain") is None
    assert registry.origin("plain") == f"builtin_widgets_{plugins.tag}.plain.PlainWidget (built in)"
    assert registry.origin("square") == f"many_{plugins.tag}.SquareWidget (from many-widgets 1.0)"
    assert registry.broken() == {}


def test_a_distribution_installed_after_a_first_lookup_is_seen_by_a_registry_made_after(plugins: Plugins) -> None:
    """The installed entry points are read once for every registry, and again once a folder on
    sys.path changed: a distribution installed meanwhile is not missed."""
    first = plugins.registry()
    assert first.names() == ["plain"]  # reads the entry points (none for this group yet)
    plugins.module(f"late_{plugins.tag}", f"from {plugins.widgets} import Widget\n\nclass LateWidget(Widget):\n    pass\n")
    plugins.distribution("late-widget", {"late": f"late_{plugins.tag}:LateWidget"})
    widgets = importlib.import_module(plugins.widgets)
    later = Registry("widget", widgets.Widget, group=plugins.group)
    assert later.names() == ["late"] and later.distribution("late") == "late-widget 1.0"


def test_a_broken_entry_point_fails_only_when_its_name_is_asked_for(plugins: Plugins, caplog: pytest.LogCaptureFixture) -> None:
    """Each problem names the distribution, the entry point and what to do; the rest still loads."""
    plugins.module(f"good_{plugins.tag}", f"from {plugins.widgets} import Widget\n\nclass GoodWidget(Widget):\n    pass\n")
    plugins.module(
        f"clashing_{plugins.tag}",
        f"from {plugins.widgets} import WIDGETS, Widget\n\n"
        '@WIDGETS.register("fine_first")\nclass FineFirst(Widget):\n    pass\n\n'
        '@WIDGETS.register("plain")\nclass MyPlain(Widget):\n    pass\n',
    )
    plugins.distribution(
        "bad-widgets",
        {
            "missing": "no_such_module_for_widgets:Widget",
            "not_widget": "json:dumps",
            "plain": f"good_{plugins.tag}:GoodWidget",
            "clashing": f"clashing_{plugins.tag}",
            "good": f"good_{plugins.tag}:GoodWidget",
        },
    )
    registry = plugins.registry()
    with caplog.at_level("WARNING", logger="memoryscope.registry"):
        assert registry.names() == ["good", "plain"]  # fine_first went with the rest of its module
    assert registry.get("plain").__name__ == "PlainWidget"  # the built-in keeps its name
    assert len(caplog.records) == 4
    assert all("bad-widgets" in record.getMessage() for record in caplog.records)

    def problem(name: str) -> str:
        with pytest.raises(ConfigError) as caught:
            registry.get(name, "widgets.w.class")
        return str(caught.value)

    head = "widgets.w.class: widget entry point "
    group = f"of bad-widgets 1.0 (group {plugins.group})"
    assert problem("missing") == (
        f"{head}`missing = no_such_module_for_widgets:Widget` {group} cannot be loaded: ModuleNotFoundError: "
        "No module named 'no_such_module_for_widgets'; fix it or uninstall it (pip uninstall bad-widgets)"
    )
    assert problem("not_widget") == (
        f"{head}`not_widget = json:dumps` {group} is not a widget (expected a subclass of Widget, got json.dumps); "
        "fix it or uninstall it (pip uninstall bad-widgets)"
    )
    assert registry.broken()["plain"] == (
        f"widget entry point `plain = good_{plugins.tag}:GoodWidget` {group} takes the name 'plain', which is already "
        f"builtin_widgets_{plugins.tag}.plain.PlainWidget (built in); rename the entry point in bad-widgets "
        "(a dotted `class:` path reaches the class meanwhile)"
    )
    assert "is registered twice" in problem("fine_first")
    assert problem("clashing") == problem("fine_first")
    assert "rename it in bad-widgets, or uninstall it (pip uninstall bad-widgets)" in problem("clashing")


def test_an_entry_point_named_as_no_config_can_write_it_is_refused(plugins: Plugins) -> None:
    plugins.module(f"good_{plugins.tag}", f"from {plugins.widgets} import Widget\n\nclass GoodWidget(Widget):\n    pass\n")
    plugins.distribution("odd-names", {"my-widget": f"good_{plugins.tag}:GoodWidget"})
    registry = plugins.registry()
    assert "my-widget" not in registry
    assert "has a name a config cannot use" in registry.broken()["my-widget"]
