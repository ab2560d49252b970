"""One schema for the whole config, checked before anything runs.

`validate_config(raw)` resolves every `class:` through its kind's registry, validates every
entry's keys against that class's `Params` model, parses and checks every workflow, and checks
every cross-reference (every `*_model` key of a worker, chat or store; a chat's service), and
bounds every number (`memoryscope.config.bounds`). All problems are collected and raised
together as one ConfigError, each with its YAML path, quoting at most about 80 characters of a
value. One mistake is reported once: what refers to a broken entry or section (a workflow naming
a worker of a broken `worker:` section, a store naming a broken model, a chat naming a broken
service) is not reported again, nor are the keys of an entry that is not a mapping. Things that
load but deserve the user's attention (an API key written in the config) come back as
`Config.warnings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from memoryscope.config.bounds import bound_problems
from memoryscope.config.kinds import registry_for
from memoryscope.config.references import ModelReferences
from memoryscope.config.server_settings import ServerSettings
from memoryscope.config.specs import ComponentSpec, Config, GlobalSettings, ModelSpec, OperationSpec, ServiceSpec
from memoryscope.context import CALLER_FIELDS
from memoryscope.errors import ConfigError, MemoryScopeError, closest, shorten
from memoryscope.models.registry import MODEL_CLASSES
from memoryscope.operation import default_operation_class
from memoryscope.worker import WORKERS
from memoryscope.workflow import check_plan, parse_workflow

# The spec types live in the leaf `memoryscope.config.specs` (every layer uses them); this module,
# which imports every registry to check a config, keeps their old import path.
__all__ = ["GlobalSettings", "Config", "ComponentSpec", "ModelSpec", "OperationSpec", "ServiceSpec", "validate_config"]

DEFAULT_STORE = "sqlite_memory_store"
SECTIONS = ("global", "model", "memory_store", "worker", "memory_service", "memory_chat", "server")


def validate_config(
    raw: Mapping[str, Any], source: str = "config", notices: tuple[str, ...] = (), warnings: tuple[str, ...] = ()
) -> Config:
    checker = _Checker()
    config = checker.run(raw, source, notices, warnings)
    if checker.problems:
        raise ConfigError([(_short_path(where), message) for where, message in checker.problems], source=source)
    return config


class _Checker:
    """Walks the raw config once, collecting problems instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []
        self.warnings: list[str] = []
        self.broken_sections: set[str] = set()  # sections that are not mappings, reported once

    def problem(self, where: str, message: str) -> None:
        self.problems.append((where, message))

    def run(self, raw: Mapping[str, Any], source: str, notices: tuple[str, ...], warnings: tuple[str, ...]) -> Config:
        for key in raw:
            if key not in SECTIONS:
                close = closest(str(key), SECTIONS)
                hint = f" Did you mean {close!r}?" if close else ""
                self.problem(str(key), f"unknown section.{hint} Sections: {', '.join(SECTIONS)}")
        section = {name: self.mapping(raw.get(name), name) for name in SECTIONS if name != "memory_store"}
        validated = self.params(GlobalSettings, section["global"], "global")
        settings = validated if isinstance(validated, GlobalSettings) else GlobalSettings()
        models = {
            name: model_spec
            for name, entry in section["model"].items()
            if (model_spec := self.model(name, entry)) is not None
        }
        references = ModelReferences(
            models, frozenset(section["model"]) - frozenset(models), "model" in self.broken_sections, settings.enable_ranker
        )
        store_entry = raw.get("memory_store")
        store = None if store_entry is None else self.component("memory store", "memory_store", store_entry, DEFAULT_STORE)
        workers = {
            name: worker_spec
            for name, entry in section["worker"].items()
            if (worker_spec := self.component("worker", f"worker.{name}", entry)) is not None
        }
        broken_workers = frozenset(section["worker"]) - frozenset(workers)
        services = {
            name: service_spec
            for name, entry in section["memory_service"].items()
            if (service_spec := self.service(name, entry, workers, broken_workers)) is not None
        }
        chats = {
            name: spec
            for name, entry in section["memory_chat"].items()
            if (spec := self.component("chat", f"memory_chat.{name}", entry)) is not None
        }
        for spec in (store, *workers.values(), *chats.values()):
            if spec is not None:
                self.problems.extend(references.problems(spec.where, spec.params))
        broken_services = frozenset(section["memory_service"]) - frozenset(services)
        self.chat_references(chats, services, broken_services)
        self.chat_models_call_functions(chats, models)
        server = self.server(section["server"], services, chats)
        all_warnings = (*warnings, *self.warnings)
        return Config(source, settings, models, store, workers, services, chats, notices, all_warnings, server)

    def server(self, values: Mapping[str, Any], services: Mapping[str, Any], chats: Mapping[str, Any]) -> ServerSettings:
        """The `server:` section; the service and chat it names must exist."""
        validated = self.params(ServerSettings, values, "server")
        if not isinstance(validated, ServerSettings):
            return ServerSettings()
        for key, name, defined in (("service", validated.service, services), ("chat", validated.chat, chats)):
            if name is not None and name not in defined:
                section = "memory_service" if key == "service" else "memory_chat"
                known = ", ".join(defined) or "none"
                self.problem(f"server.{key}", f"no {section} is named {shorten(name)} (defined: {known})")
        return validated

    # -- pieces --------------------------------------------------------------------------------

    def mapping(self, value: Any, where: str) -> Mapping[str, Any]:
        """A section's entries; a section that is not a mapping is reported once and read as empty."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(where, f"must be a mapping, got {type(value).__name__}")
            self.broken_sections.add(where)
            return {}
        return value

    def entry(self, value: Any, where: str) -> dict[str, Any] | None:
        """An entry's keys, or None (reported once: its keys are not reported as missing too)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(where, f"must be a mapping, got {type(value).__name__}")
            return None
        return dict(value)

    def params(self, model: type[BaseModel], values: Mapping[str, Any], where: str) -> BaseModel | None:
        try:
            validated = model.model_validate(dict(values))
        except ValidationError as error:
            for item in error.errors():
                path = ".".join([where, *(str(part) for part in item["loc"])])
                message = item["msg"]
                if item["type"] == "extra_forbidden":
                    known = [name for name in model.model_fields]
                    close = closest(str(item["loc"][-1]), known)
                    hint = f" Did you mean {close!r}?" if close else ""
                    message = f"unknown key.{hint} Known: {', '.join(known)}"
                elif item["type"] == "missing":
                    message = "required key is missing"
                elif item["type"] == "int_parsing_size":  # pydantic speaks of parsing a string, even for 1e23
                    message = f"too large a number (got {shorten(item.get('input'))})"
                elif _shows_input(item):
                    message = f"{message} (got {shorten(item.get('input'))})"
                self.problem(path, message)
            return None
        out_of_bounds = bound_problems(validated)  # models not built on BoundedParams (backends, stores, chats)
        for name, message, value in out_of_bounds:
            self.problem(f"{where}.{name}", f"{message} (got {shorten(value)})")
        return None if out_of_bounds else validated

    def resolve(self, kind: str, name: Any, where: str) -> Any:
        if not isinstance(name, str) or not name:
            self.problem(where, f"`class:` must name a {kind}")
            return None
        try:
            return registry_for(kind).get(name, where)
        except MemoryScopeError as error:
            self.problems.extend(getattr(error, "problems", [(where, str(error))]))
            return None

    def component(self, kind: str, where: str, entry: Any, default_class: str | None = None) -> ComponentSpec | None:
        values = self.entry(entry, where)
        if values is None:
            return None
        cls = self.resolve(kind, values.pop("class", default_class), f"{where}.class")
        if cls is None:
            return None
        params = self.params(cls.Params, values, where)
        return None if params is None else ComponentSpec(where, cls, params)

    def model(self, name: str, entry: Any) -> ModelSpec | None:
        where = f"model.{name}"
        values = self.entry(entry, where)
        if values is None:
            return None
        class_name = values.pop("class", None)
        required = values.pop("required", True)
        if not isinstance(required, bool):
            self.problem(f"{where}.required", f"must be true or false, got {shorten(required)}")
        try:
            resolved: tuple[str, Any] = MODEL_CLASSES.resolve(class_name, values.pop("module_name", None), where)
        except MemoryScopeError as error:
            self.problems.extend(getattr(error, "problems", [(where, str(error))]))
            return None
        role, cls = resolved  # a backend class: its `Params` are the entry's keys
        params = self.params(cls.Params, values, where)
        if params is None:
            return None
        if getattr(params, "api_key", None) is not None:
            self.warnings.append(
                f"{where}.api_key: an API key is written in the config; keep it in the environment instead: "
                "`api_key_env: NAME` with `export NAME=...`"
            )
        return ModelSpec(where, cls, params, role=role, required=bool(required))

    def service(
        self, name: str, entry: Any, workers: Mapping[str, ComponentSpec], broken_workers: frozenset[str]
    ) -> ServiceSpec | None:
        where = f"memory_service.{name}"
        values = self.entry(entry, where)
        if values is None:
            return None
        operations_where = f"{where}.memory_operations"
        raw_operations = self.entry(values.pop("memory_operations", None), operations_where) or {}
        spec = self.component("memory service", where, values, default_class="memory_service")
        operations: dict[str, OperationSpec] = {}
        for op_name, op_entry in raw_operations.items():
            op_where = f"{operations_where}.{op_name}"
            op = self.component("operation class", op_where, op_entry, default_class=default_operation_class(op_name))
            if op is None:
                continue
            try:
                plan = parse_workflow(op.params.workflow, where=f"{op_where}.workflow")  # type: ignore[attr-defined]  # every Params has `workflow`
            except MemoryScopeError as error:
                self.problems.extend(getattr(error, "problems", [(op_where, str(error))]))
                continue
            if "worker" in self.broken_sections or broken_workers & set(plan.step_names()):
                continue  # the workers' section or entries are reported already; the flow is checked once they are fixed
            self.problems.extend(
                check_plan(plan, _workflow_workers(workers), given=CALLER_FIELDS, where=f"{op_where}.workflow")
            )
            operations[op_name] = OperationSpec(op_name, op_where, op.cls, op.params, plan)
        if spec is None:
            return None
        return ServiceSpec(name, where, spec.cls, spec.params, operations)

    def chat_references(
        self, chats: Mapping[str, ComponentSpec], services: Mapping[str, ServiceSpec], broken: frozenset[str]
    ) -> None:
        if "memory_service" in self.broken_sections:
            return  # reported once, at the section
        for spec in chats.values():
            service = getattr(spec.params, "memory_service", None)
            if service is not None and service not in services and service not in broken:
                close = closest(str(service), services)
                hint = f" Did you mean {close!r}?" if close else ""
                self.problem(f"{spec.where}.memory_service", f"no service {shorten(service)} under `memory_service:`.{hint}")


    def chat_models_call_functions(self, chats: Mapping[str, ComponentSpec], models: Mapping[str, Any]) -> None:
        """A chat that works by function calls (`needs_function_calling`, e.g. agent_memory_chat)
        must name a generation model that makes them."""
        for spec in chats.values():
            key = getattr(spec.params, "generation_model", None)
            model = models.get(key) if getattr(spec.cls, "needs_function_calling", False) and key else None
            if model is None:
                continue  # no such model: reported where the reference is checked
            declared = getattr(model.params, "function_calling", None)  # None: a backend without function calling
            if declared is not True:
                why = "has function_calling: false" if declared is False else f"({_class_label(model.cls)}) cannot call functions"
                self.problem(
                    f"{spec.where}.generation_model",
                    f"{spec.cls.__name__} manages memory by function calls (OpenAI tools), but model.{key} {why}; "
                    "name a model that supports tools (and set its function_calling: true)",
                )


def _class_label(cls: Any) -> str:
    return str(getattr(cls, "backend", "") or getattr(cls, "__name__", cls))


def _short_path(where: str) -> str:
    """A YAML path with each over-long key cut (a pasted value used as a key)."""
    return ".".join(part if len(part) <= 60 else f"{part[:60]}…" for part in where.split("."))


def _shows_input(item: Any) -> bool:
    """Whether a validation error may quote its input: never a secret, nor a whole entry (which may hold one)."""
    secret = any(str(part).endswith(("api_key", "password", "secret", "token")) for part in item["loc"])
    return not secret and not isinstance(item.get("input"), Mapping)


def _workflow_workers(workers: Mapping[str, ComponentSpec]) -> dict[str, Any]:
    """Names a workflow may use: the `worker:` entries, then registered workers by their own name."""
    available: dict[str, Any] = {name: WORKERS.get(name) for name in WORKERS.names()}
    available.update({name: spec.cls for name, spec in workers.items()})
    return available
