"""One schema for the whole config, checked before anything runs.

`validate_config(raw)` resolves every `class:` through its kind's registry, validates every
entry's keys against that class's `Params` model, parses and checks every workflow, and checks
every cross-reference (a store's or worker's model key, a chat's service). All problems are
collected and raised together as one ConfigError, each with its YAML path. An entry that is
broken itself is reported once: what refers to it (a workflow naming a broken worker, a store
naming a broken model) is not reported again. Things that load but deserve the user's attention
(an API key written in the config) come back as `Config.warnings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memoryscope.errors import ConfigError, MemoryScopeError, closest

__all__ = ["GlobalSettings", "Config", "ComponentSpec", "ModelSpec", "OperationSpec", "ServiceSpec", "validate_config"]

SECTIONS = ("global", "model", "memory_store", "worker", "memory_service", "memory_chat")


class GlobalSettings(BaseModel):
    """The `global:` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    language: Literal["en", "zh"] = Field(default="en", description="Prompt and display language (`cn` is read as `zh`).")
    timezone: str = Field(default="UTC", description="IANA zone used to read and show times, e.g. Asia/Shanghai.")
    output_memory_max_count: int = Field(default=20, gt=0, description="How many memories retrieval returns at most.")
    enable_ranker: bool = Field(default=True, description="Use the rank model in retrieval when one is configured.")
    enable_today_contra_repeat: bool = Field(default=True, description="Check new observations against today's.")
    enable_long_contra_repeat: bool = Field(default=True, description="Check insights against long-term memory.")
    thread_pool_max_workers: int = Field(default=4, gt=0, description="Threads for parallel workflow branches.")

    @field_validator("language", mode="before")
    @classmethod
    def _read_cn_as_zh(cls, value: Any) -> Any:
        return "zh" if value == "cn" else value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (use an IANA name such as 'Asia/Shanghai' or 'UTC')") from None
        return value

    @property
    def tzinfo(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


@dataclass(frozen=True)
class ComponentSpec:
    """One validated entry: where it sits in the YAML, its class, its parameters."""

    where: str
    cls: Any
    params: BaseModel


@dataclass(frozen=True)
class ModelSpec(ComponentSpec):
    role: str = ""  # generation | embedding | rank
    required: bool = True


@dataclass(frozen=True)
class OperationSpec:
    name: str
    where: str
    kind: Any  # an OperationKind subclass
    params: BaseModel
    plan: Any  # memoryscope.workflow Sequence


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    where: str
    cls: Any
    params: BaseModel
    operations: Mapping[str, OperationSpec]


@dataclass(frozen=True)
class Config:
    """A validated config, ready to build."""

    source: str
    settings: GlobalSettings
    models: Mapping[str, ModelSpec] = field(default_factory=dict)
    store: ComponentSpec | None = None
    workers: Mapping[str, ComponentSpec] = field(default_factory=dict)
    services: Mapping[str, ServiceSpec] = field(default_factory=dict)
    chats: Mapping[str, ComponentSpec] = field(default_factory=dict)
    notices: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # things that work but should change (a key written in the config)


def validate_config(
    raw: Mapping[str, Any], source: str = "config", notices: tuple[str, ...] = (), warnings: tuple[str, ...] = ()
) -> Config:
    checker = _Checker()
    config = checker.run(raw, source, notices, warnings)
    if checker.problems:
        raise ConfigError(checker.problems, source=source)
    return config


class _Checker:
    """Walks the raw config once, collecting problems instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []
        self.warnings: list[str] = []
        self.broken_models: frozenset[str] = frozenset()

    def problem(self, where: str, message: str) -> None:
        self.problems.append((where, message))

    def run(self, raw: Mapping[str, Any], source: str, notices: tuple[str, ...], warnings: tuple[str, ...]) -> Config:
        from memoryscope.models.registry import MODEL_CLASSES

        for key in raw:
            if key not in SECTIONS:
                close = closest(str(key), SECTIONS)
                hint = f" Did you mean {close!r}?" if close else ""
                self.problem(str(key), f"unknown section.{hint} Sections: {', '.join(SECTIONS)}")
        validated = self.params(GlobalSettings, self.mapping(raw.get("global"), "global"), "global")
        settings = validated if isinstance(validated, GlobalSettings) else GlobalSettings()
        models = {
            name: model_spec
            for name, entry in self.mapping(raw.get("model"), "model").items()
            if (model_spec := self.model(name, entry, MODEL_CLASSES)) is not None
        }
        self.broken_models = frozenset(self.mapping(raw.get("model"), "model")) - frozenset(models)
        store = self.store(raw.get("memory_store"), models)
        workers = {
            name: worker_spec
            for name, entry in self.mapping(raw.get("worker"), "worker").items()
            if (worker_spec := self.component("worker", f"worker.{name}", entry)) is not None
        }
        self.model_references(workers, models, settings)
        broken_workers = frozenset(self.mapping(raw.get("worker"), "worker")) - frozenset(workers)
        services = {
            name: service_spec
            for name, entry in self.mapping(raw.get("memory_service"), "memory_service").items()
            if (service_spec := self.service(name, entry, workers, broken_workers)) is not None
        }
        chats = {
            name: spec
            for name, entry in self.mapping(raw.get("memory_chat"), "memory_chat").items()
            if (spec := self.component("chat", f"memory_chat.{name}", entry)) is not None
        }
        self.chat_references(chats, services, models)
        return Config(source, settings, models, store, workers, services, chats, notices, (*warnings, *self.warnings))

    # -- pieces --------------------------------------------------------------------------------

    def mapping(self, value: Any, where: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(where, f"must be a mapping, got {type(value).__name__}")
            return {}
        return value

    def params(self, model: type[BaseModel], values: Mapping[str, Any], where: str) -> BaseModel | None:
        try:
            return model.model_validate(dict(values))
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
                elif _shows_input(item):
                    message = f"{message} (got {item.get('input')!r})"
                self.problem(path, message)
            return None

    def resolve(self, kind: str, name: Any, where: str) -> Any:
        from memoryscope.config.kinds import registry_for

        if not isinstance(name, str) or not name:
            self.problem(where, f"`class:` must name a {kind}")
            return None
        try:
            return registry_for(kind).get(name, where)
        except MemoryScopeError as error:
            self.problems.extend(getattr(error, "problems", [(where, str(error))]))
            return None

    def component(self, kind: str, where: str, entry: Any, default_class: str | None = None) -> ComponentSpec | None:
        entry = self.mapping(entry, where)
        values = dict(entry)
        cls = self.resolve(kind, values.pop("class", default_class), f"{where}.class")
        if cls is None:
            return None
        params = self.params(cls.Params, values, where)
        return None if params is None else ComponentSpec(where, cls, params)

    def model(self, name: str, entry: Any, model_classes: Any) -> ModelSpec | None:
        where = f"model.{name}"
        values = dict(self.mapping(entry, where))
        class_name = values.pop("class", None)
        required = values.pop("required", True)
        if not isinstance(required, bool):
            self.problem(f"{where}.required", f"must be true or false, got {required!r}")
        try:
            role, cls = model_classes.resolve(class_name, values.pop("module_name", None), where)
        except MemoryScopeError as error:
            self.problems.extend(getattr(error, "problems", [(where, str(error))]))
            return None
        params = self.params(cls.Params, values, where)
        if params is None:
            return None
        if getattr(params, "api_key", None) is not None:
            self.warnings.append(
                f"{where}.api_key: an API key is written in the config; keep it in the environment instead: "
                "`api_key_env: NAME` with `export NAME=...`"
            )
        return ModelSpec(where, cls, params, role=role, required=bool(required))

    def store(self, entry: Any, models: Mapping[str, ModelSpec]) -> ComponentSpec | None:
        if entry is None:
            return None
        spec = self.component("memory store", "memory_store", entry, default_class="sqlite_memory_store")
        if spec is not None:
            key = getattr(spec.params, "embedding_model", None)
            self.reference("memory_store.embedding_model", key, models, "embedding")
        return spec

    def model_references(
        self, workers: Mapping[str, ComponentSpec], models: Mapping[str, ModelSpec], settings: GlobalSettings
    ) -> None:
        """A worker's `*_model` parameter must name a model of that role under `model:`."""
        for spec in workers.values():
            for role in ("generation", "embedding", "rank"):
                key = getattr(spec.params, f"{role}_model", None)
                # LLM steps are skipped when there is no LLM; the rank model is unused with the ranker off.
                optional = role == "generation" or (role == "rank" and not settings.enable_ranker)
                if key is not None and not (optional and key not in models):
                    self.reference(f"{spec.where}.{role}_model", key, models, role)

    def reference(self, where: str, key: Any, models: Mapping[str, ModelSpec], role: str) -> None:
        if key is None or key in self.broken_models:
            return  # a broken model entry is reported once, at the entry
        if key not in models:
            close = closest(str(key), models)
            hint = f" Did you mean {close!r}?" if close else ""
            self.problem(where, f"no model {key!r} under `model:`.{hint} Models: {', '.join(models) or '(none)'}")
        elif models[key].role != role:
            self.problem(where, f"model.{key} is a {models[key].role} model, not a {role} model")

    def service(
        self, name: str, entry: Any, workers: Mapping[str, ComponentSpec], broken_workers: frozenset[str]
    ) -> ServiceSpec | None:
        from memoryscope.operation import default_operation_class
        from memoryscope.workflow import check_plan, parse_workflow

        where = f"memory_service.{name}"
        values = dict(self.mapping(entry, where))
        raw_operations = self.mapping(values.pop("memory_operations", None), f"{where}.memory_operations")
        spec = self.component("memory service", where, values, default_class="memory_service")
        operations: dict[str, OperationSpec] = {}
        for op_name, op_entry in raw_operations.items():
            op_where = f"{where}.memory_operations.{op_name}"
            op = self.component("operation class", op_where, op_entry, default_class=default_operation_class(op_name))
            if op is None:
                continue
            try:
                plan = parse_workflow(op.params.workflow, where=f"{op_where}.workflow")  # type: ignore[attr-defined]  # every Params has `workflow`
            except MemoryScopeError as error:
                self.problems.extend(getattr(error, "problems", [(op_where, str(error))]))
                continue
            if broken_workers & set(plan.step_names()):
                continue  # those workers' own entries are reported already; the flow is checked once they are fixed
            self.problems.extend(
                check_plan(plan, _workflow_workers(workers), given=_caller_fields(), where=f"{op_where}.workflow")
            )
            operations[op_name] = OperationSpec(op_name, op_where, op.cls, op.params, plan)
        if spec is None:
            return None
        return ServiceSpec(name, where, spec.cls, spec.params, operations)

    def chat_references(
        self, chats: Mapping[str, ComponentSpec], services: Mapping[str, ServiceSpec], models: Mapping[str, ModelSpec]
    ) -> None:
        for spec in chats.values():
            service = getattr(spec.params, "memory_service", None)
            if service is not None and service not in services:
                close = closest(str(service), services)
                hint = f" Did you mean {close!r}?" if close else ""
                self.problem(f"{spec.where}.memory_service", f"no service {service!r} under `memory_service:`.{hint}")


def _shows_input(item: Any) -> bool:
    """Whether a validation error may quote its input: never a secret, nor a whole entry (which may hold one)."""
    secret = any(str(part).endswith(("api_key", "password", "secret", "token")) for part in item["loc"])
    return not secret and not isinstance(item.get("input"), Mapping)


def _caller_fields() -> frozenset[str]:
    from memoryscope.context import CALLER_FIELDS

    return CALLER_FIELDS


def _workflow_workers(workers: Mapping[str, ComponentSpec]) -> dict[str, Any]:
    """Names a workflow may use: the `worker:` entries, then registered workers by their own name."""
    from memoryscope.worker import WORKERS

    available: dict[str, Any] = {name: WORKERS.get(name) for name in WORKERS.names()}
    available.update({name: spec.cls for name, spec in workers.items()})
    return available
