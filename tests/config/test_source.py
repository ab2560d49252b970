"""Reading configs: names and paths, YAML errors, ${VAR} filling, override precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryscope.config.source import read_config_source, shipped_config_names
from memoryscope.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_names_include_default_and_siliconflow() -> None:
    names = shipped_config_names()
    assert {"default", "siliconflow", "openai", "dashscope", "elasticsearch"} <= set(names)


def test_unknown_name_suggests_the_closest_shipped_one() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'default'"):
        read_config_source("defualt", environ={})


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file not found: .*nope\.yaml"):
        read_config_source(tmp_path / "nope.yaml", environ={})


def test_broken_yaml_reports_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "global:\n  language: en\n  timezone: [UTC\n")
    with pytest.raises(ConfigError) as caught:
        read_config_source(path, environ={})
    assert "invalid YAML at line 4" in str(caught.value)
    assert str(path) in str(caught.value)


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        read_config_source(write(tmp_path, "- a\n- b\n"), environ={})


def test_interpolation_fills_variables_and_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "model:\n  m:\n    api_base: ${BASE}\n    model_name: ${NAME:-qwen}\n    empty: ${NOTHING:-}\n")
    data, _ = read_config_source(path, environ={"BASE": "http://127.0.0.1:9/v1"})
    assert data["model"]["m"] == {"api_base": "http://127.0.0.1:9/v1", "model_name": "qwen", "empty": ""}


def test_interpolation_without_default_names_the_variable_and_path(tmp_path: Path) -> None:
    path = write(tmp_path, "model:\n  m:\n    api_base: ${MISSING_BASE}\n")
    with pytest.raises(ConfigError) as caught:
        read_config_source(path, environ={})
    assert "model.m.api_base" in str(caught.value)
    assert "MISSING_BASE" in str(caught.value)


def test_precedence_arguments_over_environment_over_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "global:\n  language: en\n  timezone: UTC\n  output_memory_max_count: 5\n")
    environ = {"MEMORYSCOPE__GLOBAL__LANGUAGE": "zh", "MEMORYSCOPE__GLOBAL__OUTPUT_MEMORY_MAX_COUNT": "7"}
    data, _ = read_config_source(path, overrides={"global.output_memory_max_count": 9}, environ=environ)
    assert data["global"] == {"language": "zh", "timezone": "UTC", "output_memory_max_count": 9}


def test_environment_override_parses_yaml_scalars(tmp_path: Path) -> None:
    path = write(tmp_path, "global:\n  enable_ranker: true\n")
    data, _ = read_config_source(path, environ={"MEMORYSCOPE__GLOBAL__ENABLE_RANKER": "false"})
    assert data["global"]["enable_ranker"] is False


def test_override_into_a_scalar_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "global: 3\n")
    with pytest.raises(ConfigError, match="global is a int, not a section"):
        read_config_source(path, overrides={"global.language": "zh"}, environ={})


def test_extends_merges_sections_and_replaces_entries_with_their_own_class(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(
        "global: {language: en, timezone: UTC}\n"
        "model:\n  emb: {class: llama_index_embedding_model, module_name: local_embedding, batch_size: 8}\n"
        "  rank: {class: llama_index_rank_model, module_name: fusion_rank, model_name: fusion}\n",
        encoding="utf-8",
    )
    child = tmp_path / "child.yaml"
    child.write_text(
        "extends: base.yaml\nglobal: {language: zh}\n"
        "model:\n  emb: {class: llama_index_embedding_model, module_name: bge_embedding, model_name: BAAI/bge-m3}\n"
        "  rank: {model_name: fusion2}\n",
        encoding="utf-8",
    )
    data, _ = read_config_source(child, environ={})
    assert data["global"] == {"language": "zh", "timezone": "UTC"}
    assert data["model"]["emb"] == {
        "class": "llama_index_embedding_model",
        "module_name": "bge_embedding",
        "model_name": "BAAI/bge-m3",
    }
    assert data["model"]["rank"]["module_name"] == "fusion_rank"
    assert data["model"]["rank"]["model_name"] == "fusion2"


def test_extends_loop_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n", encoding="utf-8")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="`extends` loops"):
        read_config_source(tmp_path / "a.yaml", environ={})
