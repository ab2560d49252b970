"""What a validated config is made of: the `global:` settings and one spec per entry.

A leaf: it imports nothing of the engine but the bounds of numbers, so every layer may use it
(the env hands `GlobalSettings` to workers, the service reads them, the store factory builds from
a `ComponentSpec`) while the checker that fills these specs (`memoryscope.config.schema`), which
knows every registry, sits above them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memoryscope.config.bounds import BoundedParams
from memoryscope.config.server_settings import ServerSettings
from memoryscope.errors import shorten

__all__ = ["GlobalSettings", "ComponentSpec", "ModelSpec", "OperationSpec", "ServiceSpec", "Config"]


class GlobalSettings(BoundedParams):
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
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name
            raise ValueError(f"unknown time zone {shorten(value)} (use an IANA name such as 'Asia/Shanghai' or 'UTC')") from None
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
    kind: Any  # an OperationKind subclass (memoryscope.operation, a layer above this one)
    params: BaseModel
    plan: Any  # a memoryscope.workflow Sequence (whose package imports the workers, above this one)


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
    server: ServerSettings = field(default_factory=ServerSettings)  # the `server:` section (`memoryscope serve`)
