"""A bundled model's weights in the format llama.cpp evaluates prompts fastest in.

Why: the embedded default ships as Q4_1, and on x86 llama.cpp has no fast matrix kernel
for Q4_1 (llamafile's tinyBLAS covers F16, Q8_0 and Q4_0), so every prompt token goes
through the generic path. The offline run's time is mostly prompt evaluation (~700-token
task prompts, ~80-token answers), and `bench/bench_models.py --formats` measured the same
answers from an F16 copy in a fraction of the time (figures in docs/benchmarks.md).
Dequantizing Q4_1 to F16 keeps the weights' values (each is `scale * q + min`, stored
again as a 16-bit float) instead of quantizing them again.

The copy is made once, with llama.cpp's own converter `llama_model_quantize` (its C API,
exported by llama-cpp-python; `tokenlens.models.local` keeps to the `Llama` class), into
the models cache (`models_cache_dir`), named after the source's SHA-256 and written under
a temporary name then renamed (`written_once`), so no process reads a half-written file.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from tokenlens.errors import ModelCallError
from tokenlens.models.bundled import format_copy_name, models_cache_dir, written_once

__all__ = ["FORMATS", "in_format"]

#: The formats a copy can be made in (llama.cpp file-type names, lower case).
FORMATS = ("f16", "q8_0", "q4_0", "f32")


def _file_type(fmt: str) -> int:
    import llama_cpp

    types = {
        "f16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16,
        "q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0,
        "q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0,
        "f32": llama_cpp.LLAMA_FTYPE_ALL_F32,
    }
    return int(types[fmt])


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """llama-cpp-python routes llama.cpp's log through the `llama-cpp-python` logger (what
    `Llama(verbose=False)` sets to ERROR); quiet it while the copy is written."""
    logger = logging.getLogger("llama-cpp-python")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def in_format(path: Path, fmt: str) -> Path:
    """`path`'s weights as a GGUF file in `fmt` (one of `FORMATS`), made on first use.

    The copy keeps the source's file name at its end (so what is looked up by name, e.g. a
    bundled model's chat format, still finds it). Finding it hashes the source (~0.3 s for
    the default): a client asks once and keeps the path.
    """
    if fmt not in FORMATS:
        raise ModelCallError(f"unknown weight format {fmt!r}; one of {', '.join(FORMATS)}")
    target = models_cache_dir() / format_copy_name(_digest(path), fmt, path)
    if target.is_file():
        return target
    try:
        import llama_cpp
    except ImportError as exc:
        raise ModelCallError("llama-cpp-python is not installed (scripts/setup.sh)") from exc

    def convert(partial: Path) -> None:
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = _file_type(fmt)
        params.allow_requantize = True  # the source is quantized: its values are kept
        params.nthread = max(1, min(2, os.cpu_count() or 1))
        with _quiet():  # llama.cpp lists every tensor on stderr
            code = llama_cpp.llama_model_quantize(
                str(path).encode(), str(partial).encode(), ctypes.byref(params)
            )
        if code != 0 or not partial.is_file():
            raise ModelCallError(f"could not write a {fmt} copy of {path} (llama.cpp code {code})")

    return written_once(target, convert)
