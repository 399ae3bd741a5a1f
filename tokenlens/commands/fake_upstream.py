"""`tokenlens fake-upstream`: the loopback Anthropic-shaped server the tests use, as a command.

For demos and for trying the proxy or a calibration without a key or a network: point
`ANTHROPIC_BASE_URL` (or `tokenlens serve --upstream`) at it. It is
`tokenlens.testing.fake_anthropic.FakeAnthropic` (starlette on uvicorn) serving in the
foreground until Ctrl-C or SIGTERM: Messages (plain and SSE), count_tokens and batches,
with a fixed latency and seeded random faults on demand. Its "model" is extractive (it
answers with the context sentences closest to the question): numbers measured against it
describe the instrument, never Claude.
"""

from __future__ import annotations

import argparse

from tokenlens.errors import TokenLensError

DEFAULT_PORT = 8788
DEFAULT_FAULT_KINDS = ("429", "529", "500")
#: Requests the server keeps in its in-memory log (it records every request; a long demo
#: must not grow without bound).
KEEP_REQUESTS = 10_000


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "fake-upstream",
        help="run a fake Anthropic API on loopback (demos, tests; not Claude)",
        description="A loopback server speaking the Anthropic Messages API (messages, "
        "streaming, count_tokens, batches) with an extractive fake model and judge, a "
        "fixed latency and seeded random faults. Any API key is accepted. Point "
        "ANTHROPIC_BASE_URL or `tokenlens serve --upstream` at it. Its answers describe "
        "nothing about Claude.",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port on 127.0.0.1 (default %(default)s)"
    )
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="delay before every API response (default %(default)s)",
    )
    parser.add_argument(
        "--stream-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="delay between streamed events (default %(default)s)",
    )
    parser.add_argument(
        "--faults",
        default=None,
        metavar="RATE[:KINDS]",
        help="fail this share of API requests at random, e.g. 0.1 (429, 529, 500) or "
        "0.2:503,529; kinds: 400 401 403 404 429 500 503 529 spend_limit",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds answers and faults")
    parser.add_argument(
        "--forget-rate",
        type=float,
        default=0.0,
        help="share of answers claiming the context lacks the information (a worse model)",
    )
    parser.add_argument(
        "--judge-noise",
        type=float,
        default=4.0,
        help="standard deviation of the fake judge's grades, in points (default %(default)s)",
    )
    parser.set_defaults(func=run)


def parse_faults(text: str | None) -> tuple[float, tuple[str, ...]]:
    """`0.2:503,529` -> (0.2, ("503", "529")); `0.1` -> (0.1, the default kinds)."""
    from tokenlens.testing.fake_anthropic import HTTP_FAULTS

    if text is None:
        return 0.0, DEFAULT_FAULT_KINDS
    rate_text, _, kinds_text = text.partition(":")
    try:
        rate = float(rate_text)
    except ValueError as exc:
        raise TokenLensError(f"--faults {text}: the rate must be a number in [0, 1]") from exc
    if not 0.0 <= rate <= 1.0:
        raise TokenLensError(f"--faults {text}: the rate must be within [0, 1]")
    kinds = tuple(k.strip() for k in kinds_text.split(",") if k.strip()) or DEFAULT_FAULT_KINDS
    unknown = [k for k in kinds if k not in HTTP_FAULTS]
    if unknown:
        raise TokenLensError(
            f"--faults {text}: unknown kind {', '.join(unknown)} (known: {' '.join(HTTP_FAULTS)})"
        )
    return rate, kinds


def run(args: argparse.Namespace) -> int:
    from tokenlens.testing.fake_anthropic import FakeAnthropic

    rate, kinds = parse_faults(args.faults)
    for name in ("latency", "stream_delay", "forget_rate", "judge_noise"):
        if getattr(args, name) < 0:
            raise TokenLensError(f"--{name.replace('_', '-')} must be >= 0")
    if not 1 <= args.port <= 65535:
        raise TokenLensError(f"--port must be within 1-65535, got {args.port}")
    server = FakeAnthropic(
        seed=args.seed,
        latency_s=args.latency,
        stream_delay_s=args.stream_delay,
        judge_noise=args.judge_noise,
        fault_rate=rate,
        fault_kinds=kinds,
        forget_rate=args.forget_rate,
        require_key=True,
        port=args.port,
        keep_requests=KEEP_REQUESTS,
    )
    faults = f"{rate:.0%} of requests fail at random ({', '.join(kinds)})" if rate else "no faults"
    print(
        f"fake Anthropic API on {server.base_url} (latency {args.latency:g} s, {faults}; "
        f"any API key). Not Claude: an extractive fake model.\n"
        f"  export ANTHROPIC_BASE_URL={server.base_url} ANTHROPIC_API_KEY=sk-ant-fake\n"
        "Ctrl-C stops it.",
        flush=True,
    )
    try:
        server.serve_forever()
    except OSError as exc:
        raise TokenLensError(f"{exc} (is the port in use? --port N)") from exc
    return 0
