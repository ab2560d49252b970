"""Model classes of a config (`class: llama_index_generation_model`) and their backends.

A model entry names a role class and, with `module_name:`, a backend inside it:
`{class: llama_index_rank_model, module_name: bge_rank, ...}`. A dotted `class:` is a user's own
model class (a subclass of GenerationModel, EmbeddingModel or RankModel) and needs no
`module_name`.
"""

from __future__ import annotations

from typing import Any

from memoryscope.errors import ConfigError, UnknownNameError
from memoryscope.models.base import (
    EMBEDDING_BACKENDS,
    GENERATION_BACKENDS,
    RANK_BACKENDS,
    EmbeddingModel,
    GenerationModel,
    RankModel,
)
from memoryscope.registry import Registry, import_object

__all__ = ["MODEL_CLASSES", "ModelClasses"]


class ModelClasses:
    """The three role classes; each owns the registry of its backends."""

    def __init__(self) -> None:
        self.roles: dict[str, tuple[str, Registry[Any]]] = {
            "llama_index_generation_model": ("generation", GENERATION_BACKENDS),
            "llama_index_embedding_model": ("embedding", EMBEDDING_BACKENDS),
            "llama_index_rank_model": ("rank", RANK_BACKENDS),
        }
        self._bases = {"generation": GenerationModel, "embedding": EmbeddingModel, "rank": RankModel}

    def resolve(self, class_name: Any, module_name: Any, where: str) -> tuple[str, type]:
        """(role, backend class) for one `model:` entry."""
        if not isinstance(class_name, str) or not class_name:
            raise ConfigError([(f"{where}.class", f"`class:` must name a model class: {', '.join(self.roles)}")])
        if class_name in self.roles:
            role, backends = self.roles[class_name]
            if not isinstance(module_name, str) or not module_name:
                raise ConfigError([(f"{where}.module_name", f"required: which {role} backend ({', '.join(backends.names())})")])
            return role, backends.get(module_name, f"{where}.module_name")
        if "." in class_name:
            cls = import_object(class_name, f"{where}.class")
            for role, base in self._bases.items():
                if isinstance(cls, type) and issubclass(cls, base):
                    return role, cls
            raise ConfigError([(f"{where}.class", f"{class_name!r} is not a GenerationModel, EmbeddingModel or RankModel")])
        raise UnknownNameError(f"{where}.class", "model class", class_name, self.roles)


MODEL_CLASSES = ModelClasses()
