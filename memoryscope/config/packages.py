"""Whether the packages a config's components need are installed: a store or model backend that
lives in an optional extra says what it lacks (`missing_packages()` on its class), so
`memoryscope check-config` and `memoryscope doctor` can say so, with the install command,
before anything is built."""

from __future__ import annotations

from memoryscope.config.specs import ComponentSpec, Config

__all__ = ["missing_packages"]


def missing_packages(config: Config) -> list[str]:
    """One line per missing package of the config's store and models: where, what, how to install."""
    specs: list[ComponentSpec] = [*config.models.values()]
    if config.store is not None:
        specs.insert(0, config.store)
    lines: list[str] = []
    for spec in specs:
        check = getattr(spec.cls, "missing_packages", None)
        if callable(check):
            lines.extend(f"{spec.where}: {message}" for message in check())
    return lines
