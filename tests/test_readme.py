"""The README says what the code does: its example config loads (and has what a chat needs), its
workflow error is the real message, and its `extends:` example is a working config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from memoryscope.config import load_config
from memoryscope.errors import ConfigError

README = Path(__file__).resolve().parents[1] / "README.md"


def readme() -> str:
    return README.read_text(encoding="utf-8")


def test_the_example_config_loads_and_stores_chat_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    block = re.search(r"```yaml\n(.*?)```", readme(), re.S)
    assert block is not None
    config = load_config(yaml.safe_load(block.group(1)))
    operations = config.services["memoryscope_service"].operations
    assert "read_message" in operations  # a chat on it remembers what is said
    assert config.chats["api_memory_chat"].params.store_operation in operations


def test_the_workflow_error_shown_is_the_real_one(tmp_path: Path) -> None:
    shown = re.search(r"```\n(my\.yaml: memory_service\..*?)\n```", readme(), re.S)
    assert shown is not None
    config = tmp_path / "my.yaml"
    config.write_text(
        "extends: default\nmemory_service:\n  memoryscope_service:\n    memory_operations:\n"
        '      retrieve_memory: {workflow: "set_query,,fuse_rerank"}\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as raised:
        load_config(str(config))
    first_line = shown.group(1).splitlines()[0]
    assert str(raised.value).splitlines()[0] == first_line.replace("my.yaml", str(config))


def test_the_extends_example_is_a_working_config(tmp_path: Path) -> None:
    example = re.search(r"`(extends: default)` and `(model: \{.*?\})`", readme(), re.S)
    assert example is not None
    path = tmp_path / "local.yaml"
    path.write_text(example.group(1) + "\n" + " ".join(example.group(2).split()) + "\n", encoding="utf-8")
    config = load_config(str(path))
    assert config.models["generation_model"].params.api_base == "http://localhost:11434/v1"
