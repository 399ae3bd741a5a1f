"""The shadow judge: on a sample of compressed requests, was the answer as good?

For a sampled request the proxy actually compressed, it replays the ORIGINAL body
(non-streaming) upstream, then hands both answers to the same blind judge the
calibration uses (`tokenlens.judge.LLMJudge`). Live traffic has no reference answer, so
the cleartext answer stands in as the reference: live retention therefore reads "how
close does the compressed answer come to what the full prompt produced", which is
stricter than the calibration's grading (two cleartext samples can differ too).

A class whose rolling retention falls below its policy bar falls back (see
`tokenlens.proxy.apply.fallback_arm`) until a new policy is published. Each judged request
costs a second completion plus a judge call: roughly double the spend of that request.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import aiohttp
import anyio.to_thread

from tokenlens.errors import JudgeError, TokenLensError
from tokenlens.judge import Judge, LLMJudge, render_request_text
from tokenlens.proxy.relay import message_text
from tokenlens.proxy.stats import ProxyStats, pair_retention
from tokenlens.proxy.upstream import UPSTREAM_ERRORS

log = logging.getLogger("tokenlens.proxy.shadow")

#: Builds a judge for one request's credentials (its `x-api-key`/version headers).
JudgeFactory = Callable[[dict[str, str]], Judge]
#: Bar used when neither the policy entry nor the policy states one (`--compress` mode).
DEFAULT_BAR = 0.95
_CLIENT_CACHE = 4


def request_key(headers: dict[str, str]) -> str | None:
    """The request's API key: `x-api-key`, or `authorization: Bearer` (SDK 2.x sends that)."""
    key = headers.get("x-api-key")
    if key:
        return key
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def anthropic_judge_factory(upstream: str, model: str) -> JudgeFactory:
    """Judges that call `model` through the upstream with the request's own key.

    The key is handed to the SDK as `api_key`, which sends it the way it sends any key.

    Clients are cached per key (in memory only, keyed by the key's hash) so a busy proxy
    does not build an SDK client per judged request.
    """
    cache: dict[str, Judge] = {}

    def build(headers: dict[str, str]) -> Judge:
        key = request_key(headers)
        if not key:
            raise JudgeError("shadow judge needs the request's API key (x-api-key or Bearer)")
        digest = hashlib.sha256(key.encode()).hexdigest()
        judge = cache.get(digest)
        if judge is None:
            from tokenlens.models.registry import make_client

            client = make_client("anthropic", model, api_key=key, base_url=upstream)
            judge = LLMJudge(client, model)
            if len(cache) >= _CLIENT_CACHE:
                cache.pop(next(iter(cache)))
            cache[digest] = judge
        return judge

    return build


class ShadowJudge:
    """Samples compressed requests and judges them off the hot path."""

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        upstream: str,
        stats: ProxyStats,
        factory: JudgeFactory,
        sample: float,
        min_pairs: int,
        seed: int | None = None,
    ) -> None:
        self._session = session
        self._upstream = upstream
        self._stats = stats
        self._factory = factory
        self._sample = sample
        self._min_pairs = min_pairs
        self._rng = random.Random(seed)
        #: Called with (original body, its uncompressed answer) after each replay: the
        #: capture keeps that answer as a reference (`tokenlens.proxy.capture`).
        self.on_replay: Callable[[dict[str, Any], str], None] | None = None

    def should_sample(self) -> bool:
        return self._sample > 0 and self._rng.random() < self._sample

    async def replay(self, body: dict[str, Any], headers: dict[str, str]) -> str:
        """The answer to the original body, asked non-streaming. Raises TokenLensError."""
        replay_body = {k: v for k, v in body.items() if k != "stream"}
        try:
            async with self._session.post(
                f"{self._upstream}/v1/messages",
                data=json.dumps(replay_body).encode(),
                headers={**headers, "content-type": "application/json"},
            ) as response:
                status, raw = response.status, await response.read()
        except UPSTREAM_ERRORS as exc:
            raise TokenLensError(f"replay failed ({type(exc).__name__})") from exc
        if status != 200:
            raise TokenLensError(f"replay answered HTTP {status}")
        try:
            return message_text(json.loads(raw))
        except (ValueError, RecursionError) as exc:
            raise TokenLensError("replay answer is not JSON") from exc

    async def judge(
        self,
        *,
        task_class: str,
        arm_key: str,
        bar: float | None,
        original_body: dict[str, Any],
        compressed_answer: str,
        headers: dict[str, str],
    ) -> None:
        """Replay, judge, record; pull the class down when its rolling retention drops."""
        stats = self._stats.for_class(task_class)
        try:
            clear_answer = await self.replay(original_body, headers)
            if self.on_replay is not None:
                self.on_replay(original_body, clear_answer)
            judge = self._factory(headers)
            grade = await anyio.to_thread.run_sync(
                partial(
                    judge.grade_pair,
                    case_key=f"live:{uuid.uuid4().hex}",
                    original_request_text=render_request_text(original_body),
                    reference=clear_answer,
                    answer_clear=clear_answer,
                    answer_comp=compressed_answer,
                )
            )
        except Exception as exc:  # a failed judgement is counted, never a grade
            stats.judge_failures += 1
            log.warning("shadow judgement failed for class %s (%s)", task_class, type(exc).__name__)
            return
        retention = pair_retention(grade.grade_comp, grade.grade_clear)
        window = self._stats.record_judgement(task_class, arm_key, retention, grade.note)
        threshold = DEFAULT_BAR if bar is None else bar
        mean = window.mean
        if (
            stats.fallback_reason is None
            and window.n >= self._min_pairs
            and mean is not None
            and mean < threshold
        ):
            stats.fallback_reason = (
                f"live retention {mean:.0%} over the last {window.n} judged requests "
                f"is below the bar {threshold:.0%}"
            )
            log.warning("class %s falls back: %s", task_class, stats.fallback_reason)
