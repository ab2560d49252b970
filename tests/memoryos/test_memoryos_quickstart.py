"""MemoryOS's README quick start, run with only its import line changed; its `BASE_URL = ""`
reaching OpenAI's URL; keys given in code without the config-key warning; the embedding notice."""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryscope import MemoryScope
from memoryscope.errors import ConfigError, ModelError
from memoryscope.memoryos import OPENAI_API_BASE, Memoryos
from memoryscope.testing.fake_openai import FakeOpenAIServer

# MemoryOS's README, "Basic Usage", as it is there (BAI-LAB/MemoryOS README.md)
README_QUICK_START = """
import os
from memoryos import Memoryos

# --- Basic Configuration ---
USER_ID = "demo_user"
ASSISTANT_ID = "demo_assistant"
API_KEY = "YOUR_OPENAI_API_KEY"  # Replace with your key
BASE_URL = ""  # Optional: if using a custom OpenAI endpoint
DATA_STORAGE_PATH = "./simple_demo_data"
LLM_MODEL = "gpt-4o-mini"

def simple_demo():
    print("MemoryOS Simple Demo")

    # 1. Initialize MemoryOS
    print("Initializing MemoryOS...")
    try:
        memo = Memoryos(
            user_id=USER_ID,
            openai_api_key=API_KEY,
            openai_base_url=BASE_URL,
            data_storage_path=DATA_STORAGE_PATH,
            llm_model=LLM_MODEL,
            assistant_id=ASSISTANT_ID,
            short_term_capacity=7,
            mid_term_heat_threshold=5,
            retrieval_queue_capacity=7,
            long_term_knowledge_capacity=100,
            #Support Qwen/Qwen3-Embedding-0.6B, BAAI/bge-m3, all-MiniLM-L6-v2
            embedding_model_name="BAAI/bge-m3"
        )
        print("MemoryOS initialized successfully!\\n")
    except Exception as e:
        print(f"Error: {e}")
        return

    # 2. Add some basic memories
    print("Adding some memories...")

    memo.add_memory(
        user_input="Hi! I'm Tom, I work as a data scientist in San Francisco.",
        agent_response="Hello Tom! Nice to meet you. Data science is such an exciting field. What kind of data do you work with?"
    )

    test_query = "What do you remember about my job?"
    print(f"User: {test_query}")

    response = memo.get_response(
        query=test_query,
    )

    print(f"Assistant: {response}")

if __name__ == "__main__":
    simple_demo()
"""

LLM_ENV = ("MEMORYSCOPE_LLM_API_BASE", "MEMORYSCOPE_LLM_API_KEY", "OPENAI_API_KEY", "NO_PROXY", "no_proxy")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)


def run_readme(base_url: str, data_path: Path) -> dict[str, object]:
    """The README's program with only its import line changed (and where the endpoint and data are)."""
    code = README_QUICK_START.replace("from memoryos import Memoryos", "from memoryscope.memoryos import Memoryos")
    code = code.replace('BASE_URL = ""', f"BASE_URL = {base_url!r}").replace('"./simple_demo_data"', repr(str(data_path)))
    namespace: dict[str, object] = {"__name__": "__main__"}
    opened: list[Memoryos] = []

    class Tracked(Memoryos):  # only to close the store the demo leaves open
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            opened.append(self)

    import memoryscope.memoryos as facade

    original = facade.Memoryos
    facade.Memoryos = Tracked  # type: ignore[misc]
    try:
        exec(compile(code, "memoryos_readme.py", "exec"), namespace)  # the README's own program
    finally:
        facade.Memoryos = original  # type: ignore[misc]
        for memo in opened:
            memo.close()
    return namespace


def test_the_readme_quick_start_runs_with_only_the_import_changed(
    clean_env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(api_key="YOUR_OPENAI_API_KEY") as fake_openai:  # answers 401 to any other key
        fake_openai.add_rule("my job", "You are Tom, a data scientist in San Francisco.")
        run_readme(fake_openai.base_url, tmp_path / "demo")

    out, err = capsys.readouterr()
    assert "MemoryOS initialized successfully!" in out and "Error:" not in out
    assert "Assistant: You are Tom, a data scientist in San Francisco." in out
    [chat] = [request for request in fake_openai.requests if request.path.endswith("/chat/completions")]
    assert chat.body["model"] == "gpt-4o-mini" and chat.status == 200
    assert "I work as a data scientist in San Francisco" in str(chat.body["messages"])  # remembered, in the prompt
    # embedding_model_name cannot be loaded here: one line says which model embeds instead
    notices = [line for line in err.splitlines() if "embedding_model_name" in line]
    assert len(notices) == 1 and "'BAAI/bge-m3'" in notices[0] and "multilingual-e5-small" in notices[0]
    with Memoryos("demo_user", "k", tmp_path / "demo", "http://127.0.0.1:9/v1", assistant_id="demo_assistant") as memo:
        said = [page["user_input"] for page in memo.short_term_memory.get_all()]
    assert said == ["Hi! I'm Tom, I work as a data scientist in San Francisco.", "What do you remember about my job?"]


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """An HTTPS proxy on 127.0.0.1 that records where each request wanted to go, and connects nowhere."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    seen: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                seen.append(connection.recv(4096).split(b"\r\n")[0])

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{listener.getsockname()[1]}")
    yield seen
    listener.close()


def test_an_empty_base_url_calls_openai(clean_env: None, proxy: list[bytes], tmp_path: Path) -> None:
    """MemoryOS's own default `BASE_URL = ""`: the request goes to OpenAI's API (caught by a local
    proxy, so nothing leaves the machine), never to a relative `/chat/completions`."""
    memo = Memoryos("ann", "sk-test", tmp_path, "", overrides={"model.generation_model.max_retries": 0})
    with memo, pytest.raises(ModelError, match=re.escape("https://api.openai.com/v1/chat/completions")):
        memo.get_response("Where do I live?")
    assert proxy == [b"CONNECT api.openai.com:443 HTTP/1.1"]


def test_a_missing_base_url_is_the_environments_else_openais(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with Memoryos("ann", "sk-test", tmp_path) as memo:
        assert memo.scope.models["generation_model"].endpoint == OPENAI_API_BASE + "/chat/completions"
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", "http://127.0.0.1:9/v1")
    with Memoryos("ann", "sk-test", tmp_path, openai_base_url="") as memo:
        assert memo.scope.models["generation_model"].endpoint == "http://127.0.0.1:9/v1/chat/completions"


def test_a_required_model_with_an_empty_api_base_stops_the_start(clean_env: None, tmp_path: Path) -> None:
    overrides = {
        "memory_store.path": str(tmp_path / "m.db"),
        "model.generation_model.required": True,
        "model.generation_model.api_base": "",
        "model.generation_model.api_key_env": None,
    }
    with pytest.raises(ConfigError, match=r"model\.generation_model\.api_base: is empty"):
        MemoryScope("memoryos", overrides=overrides)


def test_a_key_given_in_code_gets_no_config_warning_a_key_in_the_config_does(
    clean_env: None, fake_openai: FakeOpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    with Memoryos("ann", "sk-in-code", tmp_path / "a", fake_openai.base_url, embedding_api_base=fake_openai.base_url):
        pass
    assert not [record for record in caplog.records if "API key is written in the config" in record.getMessage()]
    overrides = {"model.generation_model.api_key": "sk-in-yaml"}
    with Memoryos("ann", None, tmp_path / "b", fake_openai.base_url, overrides=overrides):
        pass
    warned = [record.getMessage() for record in caplog.records if "API key is written in the config" in record.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("model.generation_model.api_key")


def test_embedding_model_name_is_served_by_an_embedding_endpoint(
    clean_env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(api_key="sk-test") as fake_openai:  # answers 401 to any other key
        served_by_an_endpoint(fake_openai, tmp_path)
    assert "embedding_model_name" not in capsys.readouterr().err  # nothing to say when nothing was asked for


def served_by_an_endpoint(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    with Memoryos(
        "ann", "sk-test", tmp_path / "a", fake_openai.base_url, embedding_model_name="BAAI/bge-m3",
        embedding_api_base=fake_openai.base_url,
    ) as memo:  # fmt: skip
        memo.add_memory("I keep bees", "How many hives?")
        memo.retriever.retrieve_context("bees")
        assert memo.embedding_model_name == "BAAI/bge-m3"
    embedded = [request for request in fake_openai.requests if request.path.endswith("/embeddings")]
    assert embedded and {request.body["model"] for request in embedded} == {"BAAI/bge-m3"}
    assert {request.status for request in embedded} == {200}
    with Memoryos("ann", "sk-test", tmp_path / "b", fake_openai.base_url, embeddings_from_llm_endpoint=True) as memo:
        assert memo.scope.models["embedding_model"].model_name == "text-embedding-3-small"
        assert memo.scope.models["embedding_model"].endpoint == fake_openai.base_url + "/embeddings"
    with Memoryos("ann", "sk-test", tmp_path / "c", fake_openai.base_url) as memo:
        assert memo.embedding_model_name.startswith("multilingual-e5-small")
