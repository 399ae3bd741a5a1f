"""Fixtures for the classifier tests: starter tasks and a bundle fitted on them once."""

from __future__ import annotations

import pytest

from tokenlens.classifier.bundle import ClassifierBundle
from tokenlens.classifier.fit import fit_bundle
from tokenlens.tasks import DEFAULT_TASKS_PATH, CalibrationTask, load_tasks


@pytest.fixture(scope="session")
def starter_tasks() -> list[CalibrationTask]:
    return load_tasks()


@pytest.fixture(scope="session")
def sample_tasks() -> list[CalibrationTask]:
    """A fixed sample for tests that need realistic tasks, not the whole set: the 140
    written tasks (short contexts), so these tests stay quick as the set grows."""
    return load_tasks(DEFAULT_TASKS_PATH / "00-written.jsonl")


@pytest.fixture(scope="session")
def starter_bundle(starter_tasks: list[CalibrationTask]) -> ClassifierBundle:
    return fit_bundle(starter_tasks)
