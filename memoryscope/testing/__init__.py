"""Test helpers shipped with MemoryScope: fakes, the store contract suite and builders.

    from memoryscope.testing import FakeOpenAIServer, StoreContract, build_worker, make_env

Names are imported on first use, so `import memoryscope.testing` needs neither pytest nor a
server library.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["FakeOpenAIServer", "FakeElasticsearch", "StoreContract", "ElasticsearchContract", "build_worker", "make_env"]

_HOMES = {
    "FakeOpenAIServer": "memoryscope.testing.fake_openai",
    "FakeElasticsearch": "memoryscope.testing.fake_elasticsearch",
    "StoreContract": "memoryscope.testing.store_contract",
    "ElasticsearchContract": "memoryscope.testing.es_contract",
    "build_worker": "memoryscope.testing.builders",
    "make_env": "memoryscope.testing.builders",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'memoryscope.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
