"""What ran is what is recorded (issue 26, point 4), in-process against the session's
Prefect server and the loopback Anthropic server.

- A resumed run's flow run parameters and its `calibration-run` artifact state the
  settings it ran with (the resumed run's), not the ones it was started with.
- A retried flow run has one progress artifact, at 100 % when it is done (before, the
  failed attempt's stayed at 70 % beside the new one).
- Its spend adds up over its attempts, from the ledger: the calls the failed attempt
  paid for are counted (before, only the last attempt's were).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from flows.calibrate import KEY_PROGRESS, KEY_RUN, KEY_SPEND, calibrate, flow_parameters
from tokenlens.calibration.runs import list_runs
from tokenlens.testing import FakeAnthropic

pytestmark = pytest.mark.slow


def artifacts_of(flow_run_id: UUID, key: str) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    with get_client(sync_client=True) as client:
        return client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
                key=ArtifactFilterKey(any_=[key]),
            )
        )


def fail_paying_once(monkeypatch: pytest.MonkeyPatch, server: FakeAnthropic) -> list[int]:
    """The paid stage pays for its first task's calls, then fails (once). The list it
    returns gets the number of calls paid by then when it failed."""
    from tokenlens.calibration import stages

    real = stages.pay_stage
    paid_before_failing: list[int] = []

    def pay_once_failing(cal: Any, tasks: Any, compressions: Any, **kwargs: Any) -> Any:
        if not paid_before_failing:
            real(cal, tasks[:1], compressions, write=False)
            paid_before_failing.append(sum(1 for r in server.calls() if r.status == 200))
            raise RuntimeError("injected: the worker lost its disk")
        return real(cal, tasks, compressions, **kwargs)

    monkeypatch.setattr(stages, "pay_stage", pay_once_failing)
    return paid_before_failing


def test_a_resumed_run_records_the_settings_it_ran_with(
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prefect.client.orchestration import get_client

    failed = fail_paying_once(monkeypatch, anthropic)
    config = make_config(classes=("extraction",), repeats=2)
    first = calibrate(**flow_parameters(config, fail_on_unresolved=False), return_state=True)
    assert first.is_failed() and failed
    [stopped] = list_runs(config.store)
    assert stopped.status == "stopped"

    # As `prefect deployment run calibrate/nightly --param resume=latest` does: every
    # other parameter keeps its default (repeats 3, every class).
    asked = {"resume": "latest", "store": str(config.store), "reports": str(config.reports)}
    asked["fail_on_unresolved"] = False
    state = calibrate(**asked, return_state=True)
    assert state.is_completed(), state
    flow_run_id = state.state_details.flow_run_id
    assert flow_run_id is not None
    with get_client(sync_client=True) as client:
        recorded = client.read_flow_run(flow_run_id).parameters
    assert (recorded["repeats"], recorded["classes"]) == (2, ["extraction"])
    assert (recorded["resume"], recorded["seed"]) == (stopped.run_id, stopped.seed)
    assert recorded["methods"] == list(config.methods) and recorded["max_tokens"] == 1024

    [summary] = artifacts_of(flow_run_id, KEY_RUN)
    text = summary.data
    assert f"Resumed run `{stopped.run_id}` (asked: `resume=latest`)" in text
    assert "| repeats | 2 | 3 |" in text  # ran with 2, asked for 3
    assert "| classes | extraction | — |" in text
    assert "Attempt 2 of this run." in text


def test_a_retried_run_reaches_100_percent_and_its_spend_adds_up_over_attempts(
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failed = fail_paying_once(monkeypatch, anthropic)
    config = make_config(repeats=1, judge="llm")
    retrying = calibrate.with_options(retries=1, retry_delay_seconds=0)
    state = retrying(**flow_parameters(config, fail_on_unresolved=False), return_state=True)
    assert state.is_completed() and failed  # the first attempt did fail
    [first_attempt] = failed
    result = state.result()
    flow_run_id = state.state_details.flow_run_id
    assert flow_run_id is not None

    progress = artifacts_of(flow_run_id, KEY_PROGRESS)
    assert [artifact.data for artifact in progress] == [100.0]  # one, and done

    paid = [r for r in anthropic.calls() if r.status == 200]
    answers = [r for r in paid if not r.is_judge]
    judged = [r for r in paid if r.is_judge]
    assert answers and judged
    # The first attempt paid for its first task's calls, the second for the rest only.
    assert 0 < first_attempt < len(paid)
    assert result.new_calls == len(paid) - first_attempt
    assert (result.run_calls, result.attempts) == (len(paid), 2)
    [spend] = artifacts_of(flow_run_id, KEY_SPEND)
    assert f"Spent: {len(paid)} paid calls, ${result.run_spent_usd:.4f} over 2 attempts" in (
        spend.data
    )
    assert f"Of which this attempt: {len(paid) - first_attempt} new calls" in spend.data
    assert result.run_spent_usd > result.spent_usd > 0
