"""`MemoryScope`: a config made real — models, store, workers, services and chats, built once.

with MemoryScope(config_path="default") as ms:
    chat = ms.default_memory_chat
    reply = chat.chat_with_memory(query="What do I play?")

MemoryScope 0.1.x's forms work too: `MemoryScope(arguments=Arguments(...))`,
`MemoryScope(config_path=..., language="en")`, `ms.default_memory_service`,
`ms.memory_chat_dict`, `MemoryScope.cli_memory_chat(...)` (see `memoryscope.compat`).
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from memoryscope.compat.arguments import (
    Arguments,
    apply_arguments,
    arguments_from_fields,
    base_config_name,
    validated_arguments,
)
from memoryscope.config.keys import model_reach
from memoryscope.config.loading import load_config
from memoryscope.config.specs import Config
from memoryscope.door import VERB_OPERATIONS, Door, Limits
from memoryscope.env import Env
from memoryscope.errors import ConfigError, NotFoundError, StoreError
from memoryscope.memory_api import MemoryApi
from memoryscope.operation import FrontendOperation, Operation
from memoryscope.service import MemoryService
from memoryscope.stores.base import MemoryStore
from memoryscope.stores.factory import build_store
from memoryscope.worker import WORKERS, Worker
from memoryscope.workflow import WorkflowRunner, parse_workflow

__all__ = ["MemoryScope", "require_store_file"]

logger = logging.getLogger("memoryscope")


class MemoryScope(MemoryApi):
    """Everything one config describes, ready to use. Close it (or use `with`) when done.

    The simple memory API (`add`, `search`, `get`, `get_all`, `update`, `delete`, `delete_all`,
    `history`) comes from `memoryscope.memory_api.MemoryApi`."""

    def __init__(
        self,
        config_path: str | Path | None = None,
        *,
        config: Config | Mapping[str, Any] | None = None,
        overrides: Mapping[str, Any] | None = None,
        arguments: Arguments | None = None,
        store_must_exist: bool = False,
        **argument_fields: Any,
    ) -> None:
        """`config_path`: a shipped config's name or a YAML path (default: `default`); `config`: a
        validated Config or a raw dict instead; `overrides`: `{"global.language": "zh"}`.
        `arguments` (an `Arguments`) or single `Arguments` fields as keywords: MemoryScope 0.1.x's
        settings, set over the config (the environment's `MEMORYSCOPE__...` and `overrides` win
        over them, as over the YAML). `store_must_exist`: for a face that only reads: a SQLite
        store file that does not exist is a NotFoundError naming it, and nothing is created
        (by default the first use creates the file and its folders)."""
        if isinstance(config, Config):
            self.config = config
        else:
            self.config = _load_config(config_path, config, overrides, arguments, argument_fields)
        # when no config file gives the store and its model as built, a fix must not say `--config`
        model_overrides = any(str(key).startswith("model.") for key in overrides or {})
        built_otherwise = arguments is not None or bool(argument_fields) or model_overrides
        self._config_file = None if built_otherwise else _config_file(self.config.source)
        settings = self.config.settings
        self.notices: list[str] = list(self.config.notices)
        self.warned: list[str] = []  # the notices already logged as warnings: a face shows them once
        self._executor = ThreadPoolExecutor(settings.thread_pool_max_workers, thread_name_prefix="memoryscope")
        self.models = self._build_models()
        self.store = self._build_store(store_must_exist)
        self.env = Env(settings=settings, models=self.models, store=self.store, notices=self.notices)
        try:
            self.workers = self._build_workers()
            self.services = self._build_services()
            self.chats = self._build_chats()
        except BaseException:
            self.close()
            raise
        for notice in self.notices:
            logger.info(notice)
        for warning in self.config.warnings:
            logger.warning(warning)
        for service in self.services.values():
            service.start()  # background work begins only once everything it may use is built

    # -- public ------------------------------------------------------------------------------

    @property
    def default_service(self) -> MemoryService:
        if not self.services:
            raise ConfigError([("memory_service", "this config defines no memory service")], source=self.config.source)
        return next(iter(self.services.values()))

    @property
    def door(self) -> Door:
        """Every verb, for a caller (`memoryscope.door`): what every face of this scope calls."""
        door = self.__dict__.get("_door")
        if door is None:
            chat = next(iter(self.chats.values()), None)
            params = getattr(chat, "params", None)
            door = Door(
                self.default_service,
                self.store,
                self.config.settings,
                limits=Limits.of(self.config.server),
                source=str(self.config.source),
                retrieve_operation=getattr(params, "retrieve_operation", "retrieve_memory"),
                store_operation=getattr(params, "store_operation", "read_message"),
                agent_policy=any(getattr(each, "manages_own_memory", False) for each in self.chats.values()),
                heat_threshold=self._heat_threshold(),
                core_memory_of=self._core_memory_of(),
            )
            self.__dict__["_door"] = door
        return door

    def _core_memory_of(self) -> Callable[[str, str], Any] | None:
        """How the door reaches a user's core memory blocks: through the first chat that manages
        its own memory (an agent), whose agent keeps them (None without one)."""
        agent_chat = next((each for each in self.chats.values() if getattr(each, "manages_own_memory", False)), None)
        if agent_chat is None:
            return None
        return lambda user, target: agent_chat.agent_for(user, target_name=target).core

    def _heat_threshold(self) -> float | None:
        """MemoryOS's promotion heat: the `mid_term_heat_threshold` of the first worker of the
        `memoryos_update` operation that has one (None without that operation)."""
        operation = self.default_service.operations.get("memoryos_update")
        if operation is None:
            return None
        for name in re.split(r"[\s,|\[\]]+", str(operation.params.workflow)):
            spec = self.config.workers.get(name)
            value = getattr(spec.params, "mid_term_heat_threshold", None) if spec is not None else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
        return None

    @property
    def default_memory_chat(self) -> Any:
        if not self.chats:
            raise ConfigError([("memory_chat", "this config defines no memory chat")], source=self.config.source)
        return next(iter(self.chats.values()))

    @property
    def default_memory_service(self) -> MemoryService:
        """The first service (MemoryScope 0.1.x's name for `default_service`)."""
        return self.default_service

    @property
    def memory_chat_dict(self) -> dict[str, Any]:
        """The chats by config key, as MemoryScope 0.1.x named them."""
        return self.chats

    @property
    def memory_service_dict(self) -> dict[str, MemoryService]:
        """The services by config key, as MemoryScope 0.1.x named them."""
        return self.services

    @classmethod
    def cli_memory_chat(cls, **kwargs: Any) -> int:
        """MemoryScope 0.1.x's command-line entry: build from `kwargs` (`config_path=` and `Arguments`
        fields), run the chat on the terminal; needs a chat with a terminal loop (`cli_memory_chat`)."""
        with cls(**kwargs) as scope:
            chat = scope.default_memory_chat
            run = getattr(chat, "run", None)
            if run is None:
                raise ConfigError(
                    [("memory_chat", f"{type(chat).__name__} has no terminal loop; use memory_chat_class='cli_memory_chat'")],
                    source=scope.config.source,
                )
            return int(run())

    @property
    def has_generation_model(self) -> bool:
        return any(spec.role == "generation" for name, spec in self.config.models.items() if name in self.models)

    def usage(self) -> dict[str, dict[str, float]]:
        """Calls, tokens and latency so far, per model key."""
        return {name: model.usage.snapshot() for name, model in self.models.items()}

    def close(self, timeout: float | None = None) -> None:
        """Stop the services' schedulers, then release threads and the store.

        A background operation still running is waited for up to `timeout` seconds (default: each
        service's `shutdown_timeout_s`), then abandoned: it stops before its atomic write.
        """
        finished = all([service.close(timeout) for service in getattr(self, "services", {}).values()])
        # an abandoned run may still hold a parallel step; do not wait for it here
        self._executor.shutdown(wait=finished, cancel_futures=True)
        store = getattr(self, "store", None)
        if store is not None:
            store.close()

    def __enter__(self) -> MemoryScope:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- building ----------------------------------------------------------------------------

    def _build_models(self) -> dict[str, Any]:
        models: dict[str, Any] = {}
        for name, spec in self.config.models.items():
            if spec.role == "rank" and not self.config.settings.enable_ranker:
                # no step calls a rank model with the ranker off: nothing to build, nothing to warn about
                self.notices.append(f"model.{name} is not used: global.enable_ranker is false")
                continue
            reach = model_reach(name, spec)
            if not reach.usable and not spec.required:
                self.notices.append(f"model.{name} left out ({reach.why}); steps that need it are skipped")
                continue
            if reach.why == "no api_base":  # required: never a relative `/chat/completions`
                problem = "is empty, and this model is required: give its API's base URL, e.g. https://api.openai.com/v1"
                raise ConfigError([(f"model.{name}.api_base", problem)], source=self.config.source)
            params = spec.params
            if reach.keyless:
                self.notices.append(reach.why)
                self.warned.append(reach.why)
                logger.warning(reach.why)
                params = params.model_copy(update={"api_key_env": None})
            models[name] = spec.cls(params)
        return models

    def _build_store(self, must_exist: bool) -> MemoryStore | None:
        spec = self.config.store
        if spec is None:
            return None
        if must_exist:
            require_store_file(self.config)
        path = getattr(spec.params, "path", None)  # a file store's (SQLite)
        try:
            return build_store(spec, self.models.__getitem__)
        except StoreError as error:
            if _REEMBED_ADVICE not in str(error) or not isinstance(path, Path):
                raise
            raise StoreError(str(error).replace(_REEMBED_ADVICE, self._model_change_fix(path))) from None

    def _model_change_fix(self, path: Path) -> str:
        """What to do about a store of another embedding model, as commands that run as printed."""
        if self._config_file is not None:
            command = f"memoryscope reembed --config {shlex.quote(self._config_file)} --store {shlex.quote(str(path))}"
            return (
                f"re-embed its memories with this config's model: `{command}`; "
                "or point memory_store.path (--store) at another file"
            )
        aside = f"mv {shlex.quote(str(path))} {shlex.quote(str(path) + '.bak')}"
        return (
            "keep each model's memories in a file of its own: give this one another (store_path= in Arguments, "
            "--store_path= on the command line, memory_store.path in a config), "
            f"or set this file aside to start afresh: `{aside}`"
        )

    def _build_workers(self) -> dict[str, Worker]:
        """Every worker some workflow uses, built and bound once, shared by all runs."""
        used = {
            name
            for service in self.config.services.values()
            for op in service.operations.values()
            for name in op.plan.step_names()
        }
        workers: dict[str, Worker] = {}
        for name in sorted(used):
            spec = self.config.workers.get(name)
            if spec is not None:
                worker = spec.cls(name, spec.params)
            else:
                cls = WORKERS.get(name, f"worker.{name}")
                worker = cls(name, cls.Params())
            worker.bind(self.env)
            workers[name] = worker
        return workers

    def _skipped_workers(self) -> frozenset[str]:
        """LLM-only steps, when no generation model is configured."""
        if self.has_generation_model:
            return frozenset()
        skipped = frozenset(name for name, worker in self.workers.items() if worker.needs_generation_model)
        if skipped:
            self.notices.append(f"no LLM configured: steps {', '.join(sorted(skipped))} are skipped")
        return skipped

    def _build_services(self) -> dict[str, MemoryService]:
        skip = self._skipped_workers()
        services: dict[str, MemoryService] = {}
        for name, spec in self.config.services.items():
            operations = {
                op_name: Operation(
                    name=op_name,
                    params=op.params,
                    backend=bool(op.kind.backend),
                    runner=WorkflowRunner(
                        op_name,
                        op.plan,
                        {step: self.workers[step] for step in op.plan.step_names()},
                        skip=skip,
                        executor=self._executor,
                        where=f"{op.where}.workflow",
                    ),
                )
                for op_name, op in spec.operations.items()
            }
            service = spec.cls(name, spec.params, operations, self._executor, store=self.store, settings=self.config.settings)
            service.verb_operations = self._verb_operations(name, set(operations), skip)
            services[name] = service
        return services

    def _verb_operations(self, service: str, configured: set[str], skip: frozenset[str]) -> dict[str, Operation]:
        """The operations verbs run that this service's config does not define, built in."""
        if self.store is None:
            return {}
        built: dict[str, Operation] = {}
        for op_name, (worker_class, params) in VERB_OPERATIONS.items():
            if op_name in configured:
                continue
            where = f"memory_service.{service}.memory_operations.{op_name} (built in)"
            step = f"verb_{op_name}"
            cls = WORKERS.get(worker_class, where)
            worker = cls(step, cls.Params.model_validate(params))
            worker.bind(self.env)
            runner = WorkflowRunner(
                op_name, parse_workflow(step, where), {step: worker}, skip=skip, executor=self._executor, where=where
            )
            description = f"the {op_name} verb's operation (built in: the config defines none)"
            built[op_name] = Operation(op_name, FrontendOperation.Params(workflow=step, description=description), False, runner)
        return built

    def _build_chats(self) -> dict[str, Any]:
        return {name: spec.cls(name, spec.params, self) for name, spec in self.config.chats.items()}


def _load_config(
    config_path: str | Path | None,
    config: Mapping[str, Any] | None,
    overrides: Mapping[str, Any] | None,
    arguments: Arguments | None,
    argument_fields: Mapping[str, Any],
) -> Config:
    """The config named, with MemoryScope 0.1.x `Arguments` (or single fields of it) set over it."""
    if arguments is None and not argument_fields:
        return load_config(config if config is not None else (config_path or "default"), overrides)
    if arguments is not None and argument_fields:
        names = ", ".join(sorted(argument_fields))
        raise ConfigError(f"give either `arguments=` or single argument keywords ({names}), not both")
    if arguments is not None:
        settings, given = validated_arguments(arguments), None
    else:
        settings, given = arguments_from_fields(argument_fields)
    own_base = config is None and config_path is None
    source = config if config is not None else (config_path or base_config_name(settings))
    return load_config(source, overrides, adjust=lambda raw: apply_arguments(raw, settings, given, own_store_path=own_base))


def require_store_file(config: Config) -> None:
    """For a face that only reads: a NotFoundError naming the config's SQLite store file when it
    does not exist (opening it would create it). A server's store (Elasticsearch) passes."""
    path = getattr(config.store.params, "path", None) if config.store is not None else None
    if isinstance(path, Path) and not path.exists():
        raise NotFoundError(
            f"memory store {path} does not exist, so there is nothing to read (and nothing was created). "
            "Check the path (memory_store.path, or --store); the first write creates it",
            code="no_store",
        )


# the generic fix a store gives for vectors of another embedding model; a scope knows the runnable one
_REEMBED_ADVICE = "re-embed it with `memoryscope reembed --config ...` or point memory_store.path at another file"
_SHIPPED_LABEL = re.compile(r"config '([^']+)'")


def _config_file(source: str) -> str | None:
    """What `--config` takes for a config's `source` label: a shipped name or a path (None: a dict)."""
    shipped = _SHIPPED_LABEL.fullmatch(source)
    if shipped:
        return shipped.group(1)
    return None if source == "config" else source
