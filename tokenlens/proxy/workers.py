"""`tokenlens serve --workers N`: N proxy processes on one port, via uvicorn's supervisor.

Why uvicorn's own workers and not gunicorn: uvicorn (already a dependency) binds the port
once, spawns N processes that accept on it, restarts one that dies and forwards signals;
gunicorn would add a dependency and a second configuration surface for the same result.

Each worker builds its app from the parsed `serve` arguments, handed over in an
environment variable (spawned processes start from scratch), so every worker runs exactly
the settings the command line gave. Metrics work across workers through prometheus_client's
multiprocess mode: the command creates a fresh `PROMETHEUS_MULTIPROC_DIR` in a temporary
folder before any worker starts (prometheus_client picks its mode when first imported) and
deletes it on exit, so counts never leak from one run into the next. A worker marks its
live gauges dead when it shuts down cleanly; those of a worker killed hard are dropped at
the next scrape (`metrics.reap_dead_workers`), while its counters rightly stay.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
from typing import Any

from tokenlens.proxy.metrics import MULTIPROC_ENV
from tokenlens.proxy.settings import ProxySettings

log = logging.getLogger("tokenlens.proxy")

ARGS_ENV = "TOKENLENS_SERVE_ARGS"
APP_FACTORY = "tokenlens.proxy.workers:app_from_env"


def run_workers(args: argparse.Namespace, settings: ProxySettings) -> int:
    """Serve with `settings.workers` processes under uvicorn's supervisor.

    The same steps as `uvicorn.run(..., workers=N)`, but with the proxy's own Config, so
    every worker gets the guarded protocol and the header limits (`proxy.server`)."""
    from uvicorn.supervisors import Multiprocess

    from tokenlens.proxy.server import ProxyServerConfig

    workers = settings.workers
    handed = {key: value for key, value in vars(args).items() if key != "func"}
    metrics_dir = tempfile.mkdtemp(prefix="tokenlens-metrics-")
    previous = {name: os.environ.get(name) for name in (MULTIPROC_ENV, ARGS_ENV)}
    os.environ[MULTIPROC_ENV] = metrics_dir
    os.environ[ARGS_ENV] = json.dumps(handed, default=str)
    log.info("%d workers; shared metrics in %s (removed on exit)", workers, metrics_dir)
    try:
        config = ProxyServerConfig(
            APP_FACTORY, settings, factory=True, workers=workers, log_level="info", log_config=None
        )
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return 0


def app_from_env() -> Any:
    """The app of one worker process (uvicorn calls this in each spawned worker)."""
    from tokenlens.cli import configure_logging
    from tokenlens.proxy.app import create_app
    from tokenlens.proxy.apply import settle_process
    from tokenlens.proxy.settings import settings_from_args

    handed = json.loads(os.environ[ARGS_ENV])
    configure_logging(verbose=bool(handed.get("verbose")))
    settings = settings_from_args(argparse.Namespace(**handed))
    app = create_app(settings)
    settle_process(settings.compresses)  # as in `serve`: see `settle_process`
    return app
