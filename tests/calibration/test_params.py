"""One definition of the `calibrate` flow's parameters (`CalibrateParams`): the flow's
signature and form, the CLI's options and the deployment's parameters all come from it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from tokenlens.calibration.params import CalibrateParams, flow_parameters
from tokenlens.cli import build_parser, main
from tokenlens.commands.calibrate import NOT_OPTIONS, params_from_args
from tokenlens.config import CalibrationConfig

REPO = Path(__file__).resolve().parents[2]


def test_the_flows_form_is_the_models_fields_with_their_descriptions_and_bounds() -> None:
    """What Prefect builds the UI's Custom run form and `--param` checks from."""
    from prefect.utilities.callables import parameter_schema

    from flows.calibrate import calibrate

    schema = parameter_schema(calibrate).model_dump()["properties"]
    defaults = CalibrateParams().flow_kwargs()
    assert list(schema) == list(CalibrateParams.model_fields) == list(defaults)
    for name, field in CalibrateParams.model_fields.items():
        assert schema[name]["description"] == field.description, name
        assert schema[name].get("default") == defaults[name], name
    assert (schema["repeats"]["minimum"], schema["repeats"]["maximum"]) == (1, 50)
    assert schema["judge"]["enum"] == ["metric", "llm", "both"]
    assert "shards" in schema and "shard_retries" in schema
    # Prefect's own check of a run's parameters holds the model's bounds too.
    from prefect.exceptions import ParameterTypeError

    with pytest.raises(ParameterTypeError, match="repeats"):
        calibrate.validate_parameters({"repeats": 0})
    assert calibrate.validate_parameters({"repeats": "2"})["repeats"] == 2


def test_the_deployments_parameters_are_the_models() -> None:
    """prefect.yaml's parameters are names of the model with values it accepts, and each
    stays top level (so `--param NAME=...` changes one and keeps the others)."""
    deployments = yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]
    nightly = next(d for d in deployments if d["name"] == "nightly")
    assert nightly["entrypoint"] == "flows/calibrate.py:calibrate"
    params = CalibrateParams.model_validate(nightly["parameters"])
    assert (params.judge, params.max_spend, params.fresh_sample) == ("both", 5.0, True)
    for deployment in deployments:  # a worker restart leaves its flow runs running
        assert deployment["work_pool"]["job_variables"]["stream_output"] is False
    with pytest.raises(ValidationError, match="repeat"):
        CalibrateParams.model_validate({**nightly["parameters"], "repeat": 3})


def test_every_parameter_is_a_cli_option_with_the_same_help() -> None:
    parser = build_parser()
    calibrate = parser._subparsers._group_actions[0].choices["calibrate"]  # type: ignore[union-attr]
    by_dest = {action.dest: action for action in calibrate._actions}
    for name, field in CalibrateParams.model_fields.items():
        if name in NOT_OPTIONS:
            assert name not in by_dest
            continue
        assert name in by_dest, f"--{name.replace('_', '-')} is missing"
        if name not in ("judge_model", "resume", "shards"):
            assert by_dest[name].help == (field.description or "").replace("%", "%%"), name
    args = parser.parse_args(["calibrate", "--shards", "3", "--repeats", "2", "--class", "a,b"])
    params = params_from_args(args)
    assert (params.shards, params.repeats, params.classes) == (3, 2, ("a", "b"))
    # Only what was typed is set: the model's defaults (and offline defaults) stay free.
    assert params.config().model_fields_set == {"repeats", "classes"}


def test_bad_values_are_named_by_their_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--repeats", "0", "--dry-run"]) == 2
    assert "--repeats: Input should be greater than or equal to 1" in capsys.readouterr().err
    code = main(["calibrate", "--shards", "2", "--design", "sequential", "--dry-run"])
    assert code == 2 and "sequential design decides each round" in capsys.readouterr().err


def test_shards_need_the_server_their_workers_use(tmp_path: Path) -> None:
    """A temporary server has no workers: `--shards` would wait forever, so it is refused
    before any Prefect server starts (a new process: this one has the session's API)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_PROFILES_PATH"] = str(tmp_path / "profiles.toml")  # no profile's API either
    done = subprocess.run(
        [sys.executable, "-m", "tokenlens", "calibrate", "--shards", "2", "--backend", "local"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "--shards 2" in done.stderr and "PREFECT_API_URL" in done.stderr


def test_flow_parameters_keep_what_the_config_set(make_config: Any) -> None:
    config = make_config(repeats=1)
    params = flow_parameters(config, fresh_sample=True, shards=2)
    assert params["repeats"] == 1 and params["fresh_sample"] and params["shards"] == 2
    assert params["classes"] == list(config.classes)  # JSON-ready
    assert CalibrateParams.model_validate(params).config() == CalibrationConfig.model_validate(
        config.model_dump()
    )
