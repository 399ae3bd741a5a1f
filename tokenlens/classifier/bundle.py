"""The learned classifier as plain data, and its inference in numpy.

Why data and not a pickled scikit-learn estimator: the bundle travels inside the policy
file, which the proxy hot-reloads; a pickle would run code on load and tie the proxy to
scikit-learn's version and import cost. The bundle holds what multinomial logistic
regression needs to score a request (one weight per class for each feature slot that
carries weight, one intercept per class) and the confidence threshold below which the
classifier says "unsure". Inference is `softmax(W[slots].sum() * weight + b)` over the
slots of `tokenlens.classifier.features.hashed`, the same vector scikit-learn was fitted
on (tests check that the two agree).

numpy is imported when a bundle is loaded, not when this module is imported, so a proxy
whose policy ships no classifier never pays for it (~0.1-0.3 s here).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tokenlens.classifier.features import FEATURES_VERSION, HASH_BITS, hashed
from tokenlens.errors import PolicyError

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, eq=False)
class WeightTable:
    """Arrays derived from a bundle's fields. Compared by identity on purpose: pydantic's
    equality first compares instance dicts (where the cached table lives) and falls back
    to the fields when they differ, which numpy arrays would make raise instead."""

    weights: np.ndarray
    intercept: np.ndarray


class FitSummary(BaseModel):
    """What the bundle was fitted on and how it did there (cross-validated)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_tasks: int
    per_class: dict[str, int]
    #: Short content hashes of the training tasks (`task_digest`): an evaluation on a
    #: file that shares tasks with the training set must cross-validate, never score them.
    task_digests: tuple[str, ...]
    folds: int
    #: Regularisation strength (scikit-learn's C) and the wrong-rate target of the threshold.
    c: float
    max_wrong: float
    cv_right: int
    cv_unsure: int
    cv_wrong: int


class ClassifierBundle(BaseModel):
    """A fitted hashed-feature logistic regression with its abstention threshold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["hashed-logistic"] = "hashed-logistic"
    features_version: int = FEATURES_VERSION
    hash_bits: int = HASH_BITS
    classes: tuple[str, ...] = Field(min_length=2)
    intercept: tuple[float, ...]
    #: Feature slots with any nonzero weight, and one weight per class for each of them.
    slots: tuple[int, ...]
    weights: tuple[tuple[float, ...], ...]
    #: The top class probability must reach this for the classifier to name a class.
    threshold: float = Field(ge=0.0, le=1.0)
    fit: FitSummary

    @model_validator(mode="after")
    def _consistent(self) -> ClassifierBundle:
        if self.features_version != FEATURES_VERSION or self.hash_bits != HASH_BITS:
            raise ValueError(
                f"classifier features v{self.features_version}/{self.hash_bits} bits; this "
                f"tokenlens computes v{FEATURES_VERSION}/{HASH_BITS} bits: refit the classifier"
            )
        width = len(self.classes)
        if len(self.intercept) != width:
            raise ValueError(f"intercept has {len(self.intercept)} values for {width} classes")
        if len(self.weights) != len(self.slots):
            raise ValueError(f"{len(self.slots)} slots but {len(self.weights)} weight rows")
        if any(len(row) != width for row in self.weights):
            raise ValueError(f"every weight row needs {width} values (one per class)")
        if not all(map(math.isfinite, (*self.intercept, *(w for r in self.weights for w in r)))):
            raise ValueError("weights and intercepts must be finite numbers")
        if any(not 0 <= s < (1 << self.hash_bits) for s in self.slots):
            raise ValueError(f"a slot lies outside the {1 << self.hash_bits}-slot hash space")
        return self

    @model_validator(mode="after")
    def _warm(self) -> ClassifierBundle:
        """Build the weight table when the bundle loads (the policy's reload, off the
        request path), so no request pays for importing numpy."""
        _ = self.weight_table
        return self

    @cached_property
    def weight_table(self) -> WeightTable:
        """The dense weight table (slots × classes) and intercepts, built once per bundle."""
        import numpy as np

        table = np.zeros((1 << self.hash_bits, len(self.classes)))
        if self.slots:
            table[list(self.slots)] = np.asarray(self.weights, dtype=float)
        return WeightTable(table, np.asarray(self.intercept, dtype=float))

    def probabilities(self, body: Mapping[str, Any]) -> np.ndarray:
        """Class probabilities for one request body, in `classes` order."""
        import numpy as np

        table = self.weight_table
        slots, weight = hashed(body)
        scores = table.weights[slots].sum(axis=0) * weight + table.intercept
        scores = np.exp(scores - scores.max())
        result: np.ndarray = scores / scores.sum()
        return result

    def predict(self, body: Mapping[str, Any]) -> Prediction:
        """The class for one body, or None (unsure) below the threshold."""
        probabilities = self.probabilities(body)
        best = int(probabilities.argmax())
        confidence = float(probabilities[best])
        guess = self.classes[best]
        return Prediction(guess if confidence >= self.threshold else None, guess, confidence)


@dataclass(frozen=True)
class Prediction:
    """`label` is the class named, or None when unsure; `guess` is the top class anyway."""

    label: str | None
    guess: str
    confidence: float


def task_digest(body: Mapping[str, Any]) -> str:
    """A short content hash of a request body (model and max_tokens left out)."""
    content = {k: v for k, v in body.items() if k not in ("model", "max_tokens")}
    text = json.dumps(content, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def load_bundle(path: str | Path) -> ClassifierBundle:
    """A bundle from its own JSON file or from a policy file's `classifier` field.

    Raises:
        PolicyError: unreadable, not JSON, no bundle inside, or an invalid bundle; the
            message names the file and the problem.
    """
    file = Path(path)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyError(f"{file}: cannot read classifier ({exc.strerror or exc})") from exc
    except json.JSONDecodeError as exc:
        raise PolicyError(f"{file}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    if isinstance(raw, dict) and "calibration_id" in raw:  # a policy file
        raw = raw.get("classifier")
        if raw is None:
            raise PolicyError(f"{file}: this policy ships no classifier")
    try:
        return ClassifierBundle.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise PolicyError(f"{file}: invalid classifier at '{where}': {first['msg']}") from exc
