"""Fixtures for the classifier tests: starter tasks and a bundle fitted on them once."""

from __future__ import annotations

import pytest

from tokenlens.classifier.bundle import ClassifierBundle
from tokenlens.classifier.fit import fit_bundle
from tokenlens.tasks import CalibrationTask, load_tasks


@pytest.fixture(scope="session")
def starter_tasks() -> list[CalibrationTask]:
    return load_tasks()


@pytest.fixture(scope="session")
def starter_bundle(starter_tasks: list[CalibrationTask]) -> ClassifierBundle:
    return fit_bundle(starter_tasks)
