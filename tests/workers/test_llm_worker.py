"""LLMWorker, the base of every LLM worker: a tiny worker that is only its prompt and its parse,
run against the fake OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from pydantic import Field

from memoryscope.context import MemoryContext
from memoryscope.env import Env
from memoryscope.errors import ConfigError, MemoryScopeError, ModelError
from memoryscope.llm_output import REPAIR_INSTRUCTIONS
from memoryscope.models.base import PresetGenerationModel
from memoryscope.models.embedding.local_embedding import LocalEmbedding
from memoryscope.models.generation.openai_like import OpenAILikeGeneration
from memoryscope.testing.builders import make_env
from memoryscope.testing.fake_openai import FakeOpenAIServer
from memoryscope.worker import LLMWorker, LLMWorkerParams
from memoryscope.workers._insight import ReflectionWorker

MOOD_PROMPTS = {
    "en": {"system": "You name the mood of {user} in one word.", "user": "{user} said: {query}\nMood:"},
    "zh": {"system": "你用一个词说出{user}的心情。", "user": "{user}说：{query}\n心情："},
}
GARBAGE = "I would rather not say, but here is a long story about my day instead."


def parse_mood(reply: str) -> str | None:
    """The one word of the reply; None when it is anything else."""
    words = reply.strip().strip(".。").split()
    return words[0].casefold() if len(words) == 1 else None


class MoodWorker(LLMWorker):
    """Set `result` to the mood of the query: its prompt and its parse, nothing else."""

    reads: ClassVar[tuple[str, ...]] = ("user_name", "query")
    writes: ClassVar[tuple[str, ...]] = ("result",)
    prompt_texts: ClassVar[dict[str, dict[str, str]]] = MOOD_PROMPTS
    expected_format: ClassVar[dict[str, str]] = {"en": "one word, e.g. cheerful", "zh": "一个词，例如 开心"}
    answer_name: ClassVar[str] = "mood"

    def run(self, ctx: MemoryContext) -> None:
        mood = self.ask(self.prompt_messages(user=ctx.user_name, query=ctx.query), parse_mood)
        ctx.result = mood or ""


class EnglishOnlyMoodWorker(MoodWorker):
    prompt_texts: ClassVar[dict[str, dict[str, str]]] = {"en": MOOD_PROMPTS["en"]}


class SwitchableMoodWorker(MoodWorker):
    class Params(LLMWorkerParams):
        use_llm: bool = Field(True, description="Ask the LLM at all.")

    params: Params

    def llm_enabled(self) -> bool:
        return self.params.use_llm


class ReflectionMoodWorker(ReflectionWorker, MoodWorker):
    pass


@pytest.fixture
def server(fake_openai: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    fake = fake_openai
    fake.default_reply = GARBAGE
    yield fake


@pytest.fixture
def llm(server: FakeOpenAIServer) -> OpenAILikeGeneration:
    return OpenAILikeGeneration(OpenAILikeGeneration.Params(model_name="mood-llm", api_base=server.base_url, max_retries=0))


def bound(cls: type[MoodWorker], env: Env, **params: Any) -> MoodWorker:
    worker = cls("mood", cls.Params.model_validate(params))
    worker.bind(env)
    return worker


def mood_of(worker: MoodWorker, query: str = "I passed my driving test today!") -> str:
    ctx = MemoryContext(user_name="ann", query=query)
    worker.run(ctx)
    return ctx.result


def chats(server: FakeOpenAIServer) -> list[Any]:
    return [request.body for request in server.requests if request.path == "/v1/chat/completions"]


def test_without_its_model_the_step_is_skippable_and_a_run_fails_clearly() -> None:
    """No LLM configured: binding works (the service skips the step), running it names the key."""
    worker = bound(MoodWorker, make_env(), generation_model="small_llm")
    assert worker.needs_generation_model is True
    with pytest.raises(MemoryScopeError, match=r"worker 'mood' needs the generation model `model\.small_llm`"):
        mood_of(worker)


def test_the_reflection_workers_name_the_yaml_key_when_their_model_is_missing() -> None:
    worker = bound(ReflectionMoodWorker, make_env())
    with pytest.raises(ConfigError, match=r"worker\.mood\.generation_model: this step needs a generation model"):
        mood_of(worker)


def test_a_key_naming_another_kind_of_model_fails_at_bind(embedding: LocalEmbedding) -> None:
    with pytest.raises(ConfigError, match=r"worker\.mood\.generation_model: model\.generation_model is a LocalEmbedding"):
        bound(MoodWorker, make_env(models={"generation_model": embedding}))


def test_a_worker_without_prompts_fails_at_bind(llm: OpenAILikeGeneration) -> None:
    class Promptless(MoodWorker):
        prompt_texts: ClassVar[dict[str, dict[str, str]]] = {}

    with pytest.raises(MemoryScopeError, match="Promptless names no prompts: set `prompt_name`"):
        bound(Promptless, make_env(models={"generation_model": llm}))


@pytest.mark.parametrize(
    ("cls", "language", "system"),
    [
        (MoodWorker, "en", "You name the mood of ann in one word."),
        (MoodWorker, "zh", "你用一个词说出ann的心情。"),
        (EnglishOnlyMoodWorker, "zh", "You name the mood of ann in one word."),  # no block for it: English
    ],
)
def test_the_prompt_is_chosen_by_language(
    server: FakeOpenAIServer, llm: OpenAILikeGeneration, cls: type[MoodWorker], language: str, system: str
) -> None:
    server.add_rule("driving test", "Proud.")
    assert mood_of(bound(cls, make_env(models={"generation_model": llm}, language=language))) == "proud"
    (request,) = chats(server)
    assert request["messages"][0] == {"role": "system", "content": system}


def test_the_shipped_prompt_files_are_read_by_language(llm: OpenAILikeGeneration) -> None:
    class FileMoodWorker(MoodWorker):
        prompt_texts: ClassVar[dict[str, dict[str, str]]] = {}
        prompt_name: ClassVar[str] = "rewrite_query"  # any file of workers/prompts/

    english = bound(FileMoodWorker, make_env(models={"generation_model": llm}))
    chinese = bound(FileMoodWorker, make_env(models={"generation_model": llm}, language="zh"))
    assert english.prompt_messages(history="", query="q")[1].content.startswith("Chat:")
    assert chinese.prompt_messages(history="", query="q")[1].content.startswith("对话：")


def test_a_readable_reply_is_asked_once(server: FakeOpenAIServer, llm: OpenAILikeGeneration) -> None:
    server.add_rule("driving test", "Proud.")
    assert mood_of(bound(MoodWorker, make_env(models={"generation_model": llm}))) == "proud"
    assert len(chats(server)) == 1


def test_garbage_gets_exactly_one_repair_request(server: FakeOpenAIServer, llm: OpenAILikeGeneration) -> None:
    """The repair request repeats the conversation, the garbage reply and the format in the language."""
    server.add_rule("请只按要求的格式", "开心")
    assert mood_of(bound(MoodWorker, make_env(models={"generation_model": llm}, language="zh"))) == "开心"
    first, repair = chats(server)
    assert repair["messages"][:2] == first["messages"]
    assert repair["messages"][2] == {"role": "assistant", "content": GARBAGE}
    assert repair["messages"][3] == {"role": "user", "content": REPAIR_INSTRUCTIONS["zh"].format(format="一个词，例如 开心")}


def test_still_garbage_after_the_repair_is_nothing_and_a_warning(
    server: FakeOpenAIServer, llm: OpenAILikeGeneration, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="memoryscope.llm_output"):
        assert mood_of(bound(MoodWorker, make_env(models={"generation_model": llm}))) == ""
    assert len(chats(server)) == 2
    assert "skipped an unreadable mood from mood-llm after one repair attempt" in caplog.text


def test_a_failing_endpoint_fails_the_run(server: FakeOpenAIServer, llm: OpenAILikeGeneration) -> None:
    """Only an unreadable answer is repaired: an endpoint error is no answer, and propagates."""
    server.fail_next(1, status=500)
    with pytest.raises(ModelError):
        mood_of(bound(MoodWorker, make_env(models={"generation_model": llm})))
    assert len(chats(server)) == 1


def test_the_workers_options_go_with_every_request(server: FakeOpenAIServer, llm: OpenAILikeGeneration) -> None:
    worker = bound(MoodWorker, make_env(models={"generation_model": llm}), generation_model_kwargs={"temperature": 0.1})
    mood_of(worker)
    assert [(body["temperature"], body["model"]) for body in chats(server)] == [(0.1, "mood-llm"), (0.1, "mood-llm")]


def test_usage_is_counted_on_the_configured_model_repairs_included(server: FakeOpenAIServer, llm: OpenAILikeGeneration) -> None:
    worker = bound(MoodWorker, make_env(models={"generation_model": llm}), generation_model_kwargs={"max_tokens": 20})
    assert isinstance(worker.require_model(), PresetGenerationModel)
    mood_of(worker)
    usage = llm.usage.snapshot()
    assert usage["calls"] == 2 and usage["errors"] == 0
    assert usage["prompt_tokens"] == sum(request.prompt_tokens for request in server.requests)
    assert usage["completion_tokens"] == sum(request.completion_tokens for request in server.requests) > 0


def test_a_worker_whose_params_turn_the_llm_off_binds_no_model(server: FakeOpenAIServer, llm: OpenAILikeGeneration) -> None:
    worker = bound(SwitchableMoodWorker, make_env(models={"generation_model": llm}), use_llm=False)
    with pytest.raises(MemoryScopeError, match="needs the generation model"):
        mood_of(worker)
    assert chats(server) == []
