"""After an answer has gone back: its usage counted, its exact savings measured, a sample
judged in the shadow.

None of this delays the client: the relay hands the whole answer (or the tapped stream's
usage and text) over once it is sent, and the calls made here run as background work
(`BackgroundWork`), which holds a bounded number and drops the rest.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from tokenlens.proxy import relay
from tokenlens.proxy.plan import Plan
from tokenlens.proxy.state import ProxyState
from tokenlens.proxy.upstream import UPSTREAM_ERRORS

log = logging.getLogger("tokenlens.proxy")

COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
#: A count_tokens call that failed in any of these ways is a measure failure, not a crash.
_MEASURE_ERRORS: tuple[type[BaseException], ...] = (*UPSTREAM_ERRORS, ValueError, AttributeError)


class FollowUp:
    """The work that follows a relayed Messages answer."""

    def __init__(self, state: ProxyState) -> None:
        self.state = state
        self.upstream = state.settings.upstream_base

    async def after_json(self, raw: bytes, encoding: str | None, plan: Plan | None) -> None:
        """A buffered answer: read its usage (and text, when judged), then `after`."""
        try:
            decoded = relay.decode_body(raw, encoding)
            message = relay.parse_message(decoded) if decoded is not None else None
            if message is not None:
                usage = message.get("usage")
                answer = relay.message_text(message) if plan and plan.judge else None
                self.after(usage if isinstance(usage, dict) else None, answer, plan)
        finally:
            self.state.background.release()

    def after(self, usage: dict[str, Any] | None, answer: str | None, plan: Plan | None) -> None:
        """Count the usage; for a compressed request, start measuring and judging."""
        state = self.state
        compressed = bool(plan and plan.compressed)
        if usage is not None:
            state.stats.record_usage(usage, compressed)
        if plan is None or not compressed or plan.original is None or plan.sent_body is None:
            return
        headers = plan.call_headers
        if state.settings.measure:
            original, sent, model = plan.original, plan.sent_body, plan.model
            state.background.spawn(lambda: self.measure(original, sent, model, headers))
        shadow = state.shadow
        if plan.judge and shadow is not None and answer is not None:
            assert plan.task_class is not None and plan.arm is not None
            task_class, arm_key, bar = plan.task_class, plan.arm.key, plan.bar
            original_body = plan.original
            state.background.spawn(
                lambda: shadow.judge(
                    task_class=task_class,
                    arm_key=arm_key,
                    bar=bar,
                    original_body=original_body,
                    compressed_answer=answer,
                    headers=headers,
                )
            )

    async def measure(
        self,
        original: dict[str, Any],
        sent: dict[str, Any],
        model: str,
        headers: dict[str, str],
    ) -> None:
        """Exact counts of both bodies from the upstream's free count_tokens endpoint."""
        stats = self.state.stats
        counts: list[int] = []
        for body in (original, sent):
            try:
                async with self.state.session.post(
                    self.upstream + COUNT_TOKENS_PATH,
                    data=json.dumps(relay.count_body(body)).encode(),
                    headers={**headers, "content-type": "application/json"},
                ) as response:
                    answer = await response.read()
                value = json.loads(answer).get("input_tokens") if response.status == 200 else None
            except _MEASURE_ERRORS as exc:
                log.warning("count_tokens failed (%s)", type(exc).__name__)
                value = None
            if not isinstance(value, int):
                stats.measure_failures += 1
                return
            counts.append(value)
        stats.record_measurement(model, counts[0], counts[1])
