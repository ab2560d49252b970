"""`/metrics` text: `ServerMetrics.render` on a real app (the default config, a SQLite file, the
fake OpenAI-compatible server as its LLM), read back with the strict parser below."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import memoryscope
from memoryscope.app import MemoryScope
from memoryscope.errors import MemoryScopeError, ModelError, StoreError
from memoryscope.memory import MemoryStatus
from memoryscope.models.base import ChatMessage
from memoryscope.server.metrics import CONTENT_TYPE, ServerMetrics
from memoryscope.testing.fake_openai import FakeOpenAIServer

SERVICE = "memoryscope_service"  # the default config's one service

# -- a strict reader of the text format 0.0.4 --------------------------------------------------

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]Inf|NaN"
HELP_LINE = re.compile(rf"# HELP ({NAME}) (.*)")
TYPE_LINE = re.compile(rf"# TYPE ({NAME}) (counter|gauge|histogram|summary|untyped)")
SAMPLE_LINE = re.compile(rf"({NAME})(?:\{{(.*)\}})? ({NUMBER})")
LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

Series = tuple[str, frozenset[tuple[str, str]]]


@dataclass
class Exposition:
    samples: dict[Series, float] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    comments: list[str] = field(default_factory=list)

    def value(self, name: str, **labels: str) -> float:
        return self.samples[(name, frozenset(labels.items()))]

    def series(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        return {labels: value for (sample_name, labels), value in self.samples.items() if sample_name == name}

BUILT_IN = ("conversation", "observation", "obs_customized", "insight", "memoryos_page", "memoryos_segment")
BUILT_IN += ("memoryos_profile", "memoryos_knowledge")


def parse(text: str) -> Exposition:
    """Read `text`, failing on anything the format does not allow: a sample before its family's
    HELP and TYPE, a family's samples not together, a family or series given twice, a bad line."""
    assert text.endswith("\n"), "the text must end with a newline"
    parsed = Exposition()
    lines = text[:-1].split("\n")
    family: str | None = None  # the family whose samples may follow
    expect_type: str | None = None
    for number, line in enumerate(lines, 1):
        where = f"line {number}: {line!r}"
        if expect_type is not None:
            match = TYPE_LINE.fullmatch(line)
            assert match and match[1] == expect_type, f"{where}: TYPE of {expect_type} must follow its HELP"
            parsed.types[expect_type], family, expect_type = match[2], expect_type, None
        elif help_line := HELP_LINE.fullmatch(line):
            assert help_line[1] not in parsed.types, f"{where}: family given twice"
            expect_type = help_line[1]
        elif line.startswith("# "):
            assert not line.startswith(("# HELP", "# TYPE")), f"{where}: malformed HELP or TYPE"
            parsed.comments.append(line[2:])
        else:
            match = SAMPLE_LINE.fullmatch(line)
            assert match, f"{where}: not a sample"
            name, labels = match[1], parse_labels(match[2] or "", where)
            owner = name
            if family is not None and parsed.types[family] == "histogram" and name.endswith(HISTOGRAM_SUFFIXES):
                owner = name.rsplit("_", 1)[0]
            assert owner == family, f"{where}: sample outside its family's block (current family: {family})"
            series = (name, labels)
            assert series not in parsed.samples, f"{where}: series given twice"
            parsed.samples[series] = float(match[3])
    assert expect_type is None, "the last HELP has no TYPE"
    return parsed


def parse_labels(body: str, where: str) -> frozenset[tuple[str, str]]:
    pairs: dict[str, str] = {}
    position = 0
    while position < len(body):
        match = LABEL_PAIR.match(body, position)
        assert match, f"{where}: bad label at {body[position:]!r}"
        assert match[1] not in pairs, f"{where}: label {match[1]} twice"
        pairs[match[1]] = re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], match[2])
        position = match.end()
    return frozenset(pairs.items())


# -- the app -------------------------------------------------------------------------------


@pytest.fixture
def scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeOpenAIServer) -> Iterator[MemoryScope]:
    """The default config with the fake server as its LLM (keyless), on a fresh SQLite file."""
    for name in ("MEMORYSCOPE_LLM_API_KEY", "MEMORYSCOPE_LLM_MODEL", "MEMORYSCOPE_STORE_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORYSCOPE_LLM_API_BASE", server.base_url)
    with MemoryScope("default", overrides={"memory_store.path": str(tmp_path / "metrics.db")}) as built:
        yield built


def rendered(metrics: ServerMetrics, scope: MemoryScope) -> Exposition:
    return parse(metrics.render(scope))


# -- tests ---------------------------------------------------------------------------------


def test_every_line_parses_and_every_family_is_announced(scope: MemoryScope) -> None:
    metrics = ServerMetrics()
    metrics.observe_request("/v1/users/{user}/search", "POST", 200, 0.03)
    scope.add("likes tea", user_id="ann", infer=False)
    text = metrics.render(scope)
    parsed = parse(text)
    assert CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"
    assert parsed.types == {
        "memoryscope_info": "gauge",
        "memoryscope_uptime_seconds": "gauge",
        "memoryscope_http_requests_total": "counter",
        "memoryscope_http_request_duration_seconds": "histogram",
        "memoryscope_model_info": "gauge",
        "memoryscope_model_calls_total": "counter",
        "memoryscope_model_errors_total": "counter",
        "memoryscope_model_tokens_total": "counter",
        "memoryscope_model_latency_seconds_total": "counter",
        "memoryscope_memories": "gauge",
        "memoryscope_users": "gauge",
        "memoryscope_backend_runs_total": "counter",
        "memoryscope_backend_errors_total": "counter",
        "memoryscope_backend_running": "gauge",
        "memoryscope_pending_messages": "gauge",
        "memoryscope_parked_messages": "gauge",
        "memoryscope_metrics_errors_total": "counter",
        "memoryscope_metrics_store_read_seconds": "gauge",
    }
    assert parsed.value("memoryscope_info", version=memoryscope.__version__) == 1
    assert parsed.value("memoryscope_uptime_seconds") >= 0
    assert parsed.value("memoryscope_metrics_errors_total", source="store") == 0
    assert parsed.comments == []


def test_memories_are_counted_by_type_and_status_over_all_users(scope: MemoryScope) -> None:
    kept = scope.add(["likes tea", "keeps bees"], user_id="ann", infer=False)
    scope.add("plays chess", user_id="bob", infer=False)
    scope.add([{"role": "user", "content": "I moved to Kyoto"}, {"role": "assistant", "content": "Welcome!"}], user_id="bob")
    assert scope.store is not None
    scope.store.update(kept[0].id, status=MemoryStatus.EXPIRED)

    parsed = rendered(ServerMetrics(), scope)

    by_label = [(dict(labels), value) for labels, value in parsed.series("memoryscope_memories").items()]
    counted = {f"{labels['type']}/{labels['status']}": value for labels, value in by_label}
    # every registered type is counted (another test may have registered more: those are 0 here)
    assert {name: value for name, value in counted.items() if value or name.split("/")[0] in BUILT_IN} == {
        "conversation/valid": 2,  # the user's message and the reply
        "conversation/expired": 0,
        "observation/valid": 0,
        "observation/expired": 0,
        "obs_customized/valid": 2,
        "obs_customized/expired": 1,
        "insight/valid": 0,
        "insight/expired": 0,
        "memoryos_page/valid": 0,
        "memoryos_page/expired": 0,
        "memoryos_segment/valid": 0,
        "memoryos_segment/expired": 0,
        "memoryos_profile/valid": 0,
        "memoryos_profile/expired": 0,
        "memoryos_knowledge/valid": 0,
        "memoryos_knowledge/expired": 0,
    }
    assert all(f"{name}/valid" in counted for name in BUILT_IN)
    assert parsed.value("memoryscope_users") == 2
    assert parsed.value("memoryscope_pending_messages", service=SERVICE) == 1  # the reply waits with it, uncounted


def test_model_counters_move_with_calls_through_the_fake_server(scope: MemoryScope, server: FakeOpenAIServer) -> None:
    metrics = ServerMetrics()
    before = rendered(metrics, scope)
    scope.models["generation_model"].chat([ChatMessage("user", "What do I keep?")])
    sent = server.requests[-1]
    server.fail_next(status=400)
    with pytest.raises(ModelError):
        scope.models["generation_model"].chat([ChatMessage("user", "And what do I drink?")])

    after = rendered(metrics, scope)

    def moved(name: str, **labels: str) -> float:
        return after.value(name, model="generation_model", **labels) - before.value(name, model="generation_model", **labels)

    assert moved("memoryscope_model_calls_total") == 2
    assert moved("memoryscope_model_errors_total") == 1
    assert sent.completion_tokens > 0
    assert moved("memoryscope_model_tokens_total", kind="prompt") == sent.prompt_tokens
    assert moved("memoryscope_model_tokens_total", kind="completion") == sent.completion_tokens
    assert moved("memoryscope_model_latency_seconds_total") > 0
    info = after.series("memoryscope_model_info")
    assert frozenset({"model": "generation_model", "backend": "openai_like", "model_name": sent.body["model"]}.items()) in info


THREADS, EACH = 6, 200  # each thread observes EACH requests to each of two endpoints


class YieldingRoute(str):
    """A route template whose hash lets the other threads run. Hashing it is what counting a
    request does first, so an unguarded read-add-write of a count would lose counts here
    (plain `str` keys give the interpreter no chance to switch threads in between)."""

    def __hash__(self) -> int:
        time.sleep(0)
        return str.__hash__(self)


def observe_from_threads(metrics: ServerMetrics) -> None:
    start = threading.Barrier(THREADS)
    search = YieldingRoute("/v1/users/{user}/search")

    def serve(worker: int) -> None:
        start.wait()
        for turn in range(EACH):
            status = 404 if (worker + turn) % 4 == 0 else 200
            metrics.observe_request(search, "POST", status, 0.001 * turn)
            metrics.observe_request("/healthz", "GET", 200, 0.0)

    workers = [threading.Thread(target=serve, args=(worker,)) for worker in range(THREADS)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()


def test_request_counters_add_up_over_threads(scope: MemoryScope) -> None:
    metrics = ServerMetrics()
    observe_from_threads(metrics)
    parsed = rendered(metrics, scope)
    search = {"endpoint": "/v1/users/{user}/search", "method": "POST"}
    assert parsed.value("memoryscope_http_requests_total", **search, status="404") == THREADS * EACH // 4
    assert parsed.value("memoryscope_http_requests_total", **search, status="200") == THREADS * EACH * 3 // 4
    assert parsed.value("memoryscope_http_requests_total", endpoint="/healthz", method="GET", status="200") == THREADS * EACH
    assert parsed.value("memoryscope_http_request_duration_seconds_count", **search) == THREADS * EACH
    seconds = THREADS * 0.001 * sum(range(EACH))
    assert parsed.value("memoryscope_http_request_duration_seconds_sum", **search) == pytest.approx(seconds)


def test_histogram_buckets_are_cumulative_and_end_with_inf_equal_to_count(scope: MemoryScope) -> None:
    metrics = ServerMetrics(buckets=(0.1, 1))
    for seconds in (0.05, 0.1, 0.5, 2.0, 7.0):  # 0.1 falls in le="0.1": a bound is inclusive
        metrics.observe_request("/v1/users/{user}/memories", "GET", 200, seconds)
    metrics.observe_request("/healthz", "GET", 200, 0.2)
    parsed = rendered(metrics, scope)
    name = "memoryscope_http_request_duration_seconds"
    labels = {"endpoint": "/v1/users/{user}/memories", "method": "GET"}
    buckets = {bound: parsed.value(f"{name}_bucket", **labels, le=bound) for bound in ("0.1", "1.0", "+Inf")}
    assert buckets == {"0.1": 2, "1.0": 3, "+Inf": 5}
    assert parsed.value(f"{name}_count", **labels) == 5
    assert parsed.value(f"{name}_sum", **labels) == pytest.approx(9.65)
    assert len(parsed.series(f"{name}_bucket")) == 6  # three per (endpoint, method), no more
    for series in ({"endpoint": "/healthz", "method": "GET"}, labels):
        counts = [parsed.value(f"{name}_bucket", **series, le=bound) for bound in ("0.1", "1.0", "+Inf")]
        assert counts == sorted(counts) and counts[-1] == parsed.value(f"{name}_count", **series)


def test_a_hostile_endpoint_is_escaped_into_one_label(scope: MemoryScope) -> None:
    hostile = 'evil"} 1\nmemoryscope_users 999\n\\'
    metrics = ServerMetrics()
    metrics.observe_request(hostile, "GET", 500, 0.01)
    text = metrics.render(scope)
    assert 'endpoint="evil\\"} 1\\nmemoryscope_users 999\\n\\\\"' in text
    parsed = parse(text)
    assert parsed.value("memoryscope_http_requests_total", endpoint=hostile, method="GET", status="500") == 1
    assert parsed.value("memoryscope_users") == 0  # no injected sample: the store is empty


@pytest.mark.parametrize("failure", [StoreError("database is locked"), RuntimeError("connection reset")])
def test_a_store_that_cannot_count_leaves_its_families_out(
    scope: MemoryScope, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    scope.add("likes tea", user_id="ann", infer=False)
    metrics = ServerMetrics(store_cache_seconds=0)
    metrics.observe_request("/healthz", "GET", 200, 0.001)

    def fail() -> dict[str, int]:
        raise failure

    with monkeypatch.context() as patch:
        patch.setattr(scope.store, "user_counts", fail)
        broken = rendered(metrics, scope)
    assert broken.series("memoryscope_memories") == {} and "memoryscope_memories" not in broken.types
    assert "memoryscope_users" not in broken.types
    assert any("the store could not be read" in comment for comment in broken.comments)
    assert broken.value("memoryscope_metrics_errors_total", source="store") == 1
    assert broken.value("memoryscope_http_requests_total", endpoint="/healthz", method="GET", status="200") == 1
    assert broken.value("memoryscope_model_calls_total", model="embedding_model") >= 1

    mended = rendered(metrics, scope)
    assert mended.value("memoryscope_users") == 1
    assert mended.value("memoryscope_metrics_errors_total", source="store") == 1  # a counter: the failure stays counted


def test_a_failing_scheduler_leaves_out_its_service_only(scope: MemoryScope, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> None:
        raise MemoryScopeError("scheduler is closing")

    monkeypatch.setattr(scope.default_service.scheduler, "status", fail)
    parsed = rendered(ServerMetrics(), scope)
    assert parsed.series("memoryscope_backend_runs_total") == {}
    assert parsed.value("memoryscope_metrics_errors_total", source="scheduler") == 1
    assert parsed.value("memoryscope_users") == 0


def test_backend_runs_and_pending_messages_per_service(scope: MemoryScope) -> None:
    metrics = ServerMetrics(store_cache_seconds=0)
    scope.add({"role": "user", "content": "I moved to Kyoto"}, user_id="bob")
    before = rendered(metrics, scope)
    assert before.value("memoryscope_pending_messages", service=SERVICE) == 1
    assert before.value("memoryscope_backend_runs_total", service=SERVICE) == 0

    scope.default_service.run_operation("consolidate_memory", "bob")  # on demand, through the scheduler
    after = rendered(metrics, scope)
    assert after.value("memoryscope_backend_runs_total", service=SERVICE) == 1
    assert after.value("memoryscope_backend_errors_total", service=SERVICE) == 0
    assert after.value("memoryscope_backend_running", service=SERVICE) == 0
    assert after.value("memoryscope_parked_messages", service=SERVICE) == 0


def test_store_figures_are_reused_for_store_cache_seconds(scope: MemoryScope) -> None:
    now = [100.0]
    metrics = ServerMetrics(store_cache_seconds=10, clock=lambda: now[0])
    scope.add("likes tea", user_id="ann", infer=False)
    assert rendered(metrics, scope).value("memoryscope_users") == 1

    scope.add("plays chess", user_id="bob", infer=False)
    now[0] += 9.5
    cached = rendered(metrics, scope)
    assert cached.value("memoryscope_users") == 1  # not read again yet
    assert cached.value("memoryscope_uptime_seconds") == 9.5
    assert cached.value("memoryscope_model_calls_total", model="embedding_model") == 2  # usage is always live

    now[0] += 1
    assert rendered(metrics, scope).value("memoryscope_users") == 2


def test_a_scope_without_a_store_has_no_store_families(scope: MemoryScope) -> None:
    store = scope.store
    scope.store = None
    try:
        parsed = rendered(ServerMetrics(), scope)
    finally:
        scope.store = store
    assert "memoryscope_memories" not in parsed.types and "memoryscope_users" not in parsed.types
    assert parsed.comments == []  # nothing failed: there is nothing to count
    assert parsed.value("memoryscope_metrics_errors_total", source="store") == 0


@pytest.mark.parametrize("buckets", [(), (1.0, 1.0), (2.0, 1.0), (0.5, float("inf")), (float("nan"),)])
def test_buckets_must_be_finite_and_increasing(buckets: tuple[float, ...]) -> None:
    with pytest.raises(MemoryScopeError, match="buckets must"):
        ServerMetrics(buckets=buckets)


def test_a_negative_cache_age_is_refused() -> None:
    with pytest.raises(MemoryScopeError, match="store_cache_seconds"):
        ServerMetrics(store_cache_seconds=-1)
