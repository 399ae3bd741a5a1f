"""Worker run by `bridge.Bridge` in another interpreter: standard library + one compressor.

Usage: python _worker.py KIND OPTIONS_JSON; then one JSON body per stdin line, one JSON
answer per stdout line: {"body": ..., "cpu_s": ...} or {"error": ...} / {"unavailable": ...}.
Not imported by TokenLens itself (it must run where TokenLens is not installed).
"""

import json
import sys
import time


def headroom(options):
    from headroom import compress

    def run(body):
        model = body.get("model") or "claude-sonnet-4-5"
        result = compress(body["messages"], model=model, **options)
        return dict(body, messages=result.messages)

    return run


def llmtrim(options):
    import llmtrim as lt

    preset = options.get("preset")

    def run(body):
        out = lt.compress(json.dumps(body), lt.Provider.ANTHROPIC, preset)
        return json.loads(out.request_json)

    return run


def main():
    kind, options = sys.argv[1], json.loads(sys.argv[2])
    try:
        run = {"headroom": headroom, "llmtrim": llmtrim}[kind](options)
    except ImportError as exc:
        run = None
        reason = f"cannot import it here: {exc}"
    answer: dict  # one JSON line
    for line in sys.stdin:
        if run is None:
            answer = {"unavailable": reason}
        else:
            started = time.process_time()
            try:
                answer = {"body": run(json.loads(line))}
            except Exception as exc:  # reported to the caller, which raises its own error
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            answer["cpu_s"] = round(time.process_time() - started, 6)
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
