"""The rungs' output on the corpora `bench/bench_ladder.py` times, pinned by hash.

`test_golden.py` pins every arm on small documents; this pins what the speed figures are
measured on (a megabyte of markdown, the same with no paragraph repeated, and the
2k/20k/100k-token request bodies), so a speedup is checked on the very input it was
timed on. The digests were computed with the code before the issue-27 speed work
(commit 842c119; the no-repeat request bodies' digests too, computed with that code's
`tokenlens`). Regenerate only for an intended output change, saying why:
``python tests/compress/test_bench_corpora.py --write``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from tokenlens.compress import Arm, compress_request
from tokenlens.compress.dedup import apply_dedup
from tokenlens.compress.minify import apply_minify
from tokenlens.compress.prune import apply_prune
from tokenlens.compress.safe import apply_safe
from tokenlens.compress.select import apply_select

PINS = Path(__file__).parent / "data" / "golden_bench.json"
BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_ladder.py"
SIZES = (2_000, 20_000, 100_000)
#: The rungs the throughput section runs, and prune at the rates policies use.
RUNGS: dict[str, Callable[[str, str], str]] = {
    "safe": lambda text, _: apply_safe(text),
    "minify": lambda text, _: apply_minify(text),
    "dedup": lambda text, _: apply_dedup(text),
    "prune@0.8": lambda text, q: apply_prune(text, 0.8, q),
    "prune@0.5": lambda text, q: apply_prune(text, 0.5, q),
    "prune@0.2": lambda text, q: apply_prune(text, 0.2, q),
    "select@0.5": lambda text, q: apply_select(text, 0.5, q),
}
REQUEST_ARMS = ("safe", "prune@0.8", "prune@0.5", "prune@0.2", "select@0.5")


@cache
def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ladder_corpora", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def _texts() -> dict[str, str]:
    bench = _bench()
    return {"corpus": bench.corpus(1_000_000), "distinct": bench.distinct_corpus(1_000_000)}


def _sha(value: object) -> str:
    data = json.dumps(value, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()


def text_digest(corpus: str, rung: str) -> str:
    return _sha(RUNGS[rung](_texts()[corpus], _bench().QUESTION))


def request_digest(size: int, arm: str, source: str = "corpus") -> str:
    bench = _bench()
    body = bench.body_of_tokens(size, bench.corpus if source == "corpus" else bench.distinct_corpus)
    return _sha(compress_request(body, Arm.parse(arm)).body)


def digests() -> dict[str, str]:
    out = {f"{c} {r}": text_digest(c, r) for c in ("corpus", "distinct") for r in RUNGS}
    out |= {f"request {s} {a}": request_digest(s, a) for s in SIZES for a in REQUEST_ARMS}
    out |= {
        f"distinct request {s} {a}": request_digest(s, a, "distinct")
        for s in SIZES
        for a in REQUEST_ARMS
    }
    return out


@pytest.fixture(scope="module")
def pins() -> dict[str, str]:
    data: dict[str, str] = json.loads(PINS.read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("corpus", ["corpus", "distinct"])
@pytest.mark.parametrize("rung", list(RUNGS))
def test_a_rung_writes_the_pinned_bytes_on_the_bench_corpora(
    corpus: str, rung: str, pins: dict[str, str]
) -> None:
    assert text_digest(corpus, rung) == pins[f"{corpus} {rung}"], f"{rung} on {corpus} changed"


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("arm", REQUEST_ARMS)
def test_compress_request_writes_the_pinned_body_at_each_bench_size(
    size: int, arm: str, pins: dict[str, str]
) -> None:
    assert request_digest(size, arm) == pins[f"request {size} {arm}"], f"{arm} at {size} changed"
    found = request_digest(size, arm, "distinct")
    assert found == pins[f"distinct request {size} {arm}"], f"{arm} at {size}, no repeats, changed"


def test_the_distinct_corpus_repeats_no_eligible_paragraph() -> None:
    from tokenlens.compress.blocks import segment

    eligible = [b.text for b in segment(_texts()["distinct"]) if b.eligible]
    assert len(set(eligible)) == len(eligible)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    PINS.write_text(json.dumps(digests(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {PINS}")
