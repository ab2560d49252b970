"""MemoryScope: long-term memory for LLM chatbots and agents.

    from memoryscope import MemoryScope, Arguments    # as in MemoryScope 0.1.x
    from memoryscope import cli; cli()                 # 0.1.x's command line, on sys.argv

Both names are imported on first use, so `import memoryscope` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

__all__ = ["MemoryScope", "Arguments", "__version__"]

if TYPE_CHECKING:
    from memoryscope.app import MemoryScope
    from memoryscope.compat.arguments import Arguments

_LAZY = {"MemoryScope": "memoryscope.app", "Arguments": "memoryscope.compat.arguments"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'memoryscope' has no attribute {name!r}")
