"""What workers may use: the built models, the store and the global settings.

Built once per `MemoryScope` from the config and handed to each worker's `bind`. Lookups name
the YAML path of the key that asked, so a worker pointing at a missing model fails at load with
`worker.rank.rank_model: no model 'rank_modle' under model:. Did you mean 'rank_model'?`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memoryscope.config.specs import GlobalSettings
from memoryscope.errors import ConfigError, UnknownNameError
from memoryscope.models.base import EmbeddingModel, GenerationModel, PresetGenerationModel, RankModel
from memoryscope.stores.base import MemoryStore

__all__ = ["Env"]


@dataclass
class Env:
    settings: GlobalSettings
    models: Mapping[str, Any] = field(default_factory=dict)
    store: MemoryStore | None = None
    notices: list[str] = field(default_factory=list)

    def generation_model(self, key: str, where: str, options: Mapping[str, Any] | None = None) -> GenerationModel | None:
        """The generation model under `model.<key>`, or None when the config has no LLM. With
        `options` (a worker's `generation_model_kwargs`), every call sends them."""
        if key not in self.models:
            return None
        model: GenerationModel = self._typed(key, where, GenerationModel, "generation")
        return PresetGenerationModel(model, dict(options)) if options else model

    def embedding_model(self, key: str, where: str) -> EmbeddingModel:
        return self._typed(self._require(key, where), where, EmbeddingModel, "embedding")

    def query_embedding_model(self, key: str | None, where: str) -> EmbeddingModel | None:
        """The embedding model under `model.<key>`; with no key, the store's own (it made the
        vectors a query is compared with); None when there is neither."""
        if key is not None:
            return self.embedding_model(key, where)
        found = getattr(self.store, "embedding_model", None)
        return found if isinstance(found, EmbeddingModel) else None

    def rank_model(self, key: str, where: str) -> RankModel:
        return self._typed(self._require(key, where), where, RankModel, "rank")

    def require_store(self, where: str) -> MemoryStore:
        if self.store is None:
            raise ConfigError([(where, "this worker needs a memory store; add a `memory_store:` section")])
        return self.store

    def _require(self, key: str, where: str) -> str:
        if key not in self.models:
            raise UnknownNameError(where, "model key under `model:`", key, self.models)
        return key

    def _typed(self, key: str, where: str, role: type, role_name: str) -> Any:
        model = self.models[key]
        if not isinstance(model, role):
            raise ConfigError([(where, f"model.{key} is a {type(model).__name__}, not a {role_name} model")])
        return model
