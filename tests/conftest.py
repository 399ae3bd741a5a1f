"""Session-wide test settings.

Environment first, before anything imports prefect or huggingface: Prefect must not
write to ~/.prefect or phone home, and hub loads must fail fast instead of retrying a
network this machine does not have.
"""

from __future__ import annotations

import os
import tempfile

_SESSION_DIR = tempfile.mkdtemp(prefix="tokenlens-tests-")
os.environ["PREFECT_HOME"] = os.path.join(_SESSION_DIR, "prefect")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TIKTOKEN_CACHE_DIR"] = os.path.join(_SESSION_DIR, "tiktoken")
os.environ.pop("ANTHROPIC_API_KEY", None)
