"""Issue 24.3: capture redaction has no holes. Canaries planted anywhere never reach a file.

A property test builds random valid Messages requests (text, images, documents, tool use
with arbitrary JSON input, tool results, tool schemas, metadata, stop sequences) and
plants canaries (e-mail addresses, API-key shapes, card numbers, a custom rule's tickets)
in random places: any string, any dict key, values under keys named `type`, `role` or
`model` inside user data, and the top-level `model` itself. Each request goes through the
real capture path (`Capture.serve`, the writer thread, part files), and no canary may be
in any file the capture wrote. The API's own vocabulary must survive where the schema
puts it, so the capture stays a request `tasks harvest` can use.
"""

from __future__ import annotations

import asyncio
import json
import string
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from starlette.types import Message

from tokenlens.captures import CapturedRequest, read_records
from tokenlens.proxy.capture import Capture
from tokenlens.proxy.redact import Redactor, load_rules

MODELS = ("claude-haiku-4-5", "claude-sonnet-4-5-20250929", "claude-3-5-haiku-latest")
WORDS = string.ascii_letters + string.digits + " .,;:!?'()[]{}/-_#\n"
KEY_CHARS = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
CUSTOM_RULE = "TICKET-[0-9a-f]{24}"


def _canary(kind: str, draw: Callable[[st.SearchStrategy[Any]], Any]) -> str:
    """One canary of `kind`, with a random part so that no two are alike."""
    tail = draw(st.text(KEY_CHARS, min_size=36, max_size=40))
    if kind == "email":
        local = draw(st.text(string.ascii_lowercase, min_size=3, max_size=8))
        return f"{local}.{tail[:10].lower()}@mail-{tail[10:16].lower()}.example.org"
    if kind == "anthropic":
        return f"sk-ant-api03-{tail}"
    if kind == "aws":
        return "AKIA" + "".join(c for c in tail.upper() if c.isalnum())[:16].ljust(16, "Q")
    if kind == "github":
        return f"ghp_{tail}"
    if kind == "card":
        digits = "".join(str(ord(c) % 10) for c in tail[:12])
        return f"4111 {digits[:4]} {digits[4:8]} {digits[8:12]}"
    if kind == "bearer":  # the token is the canary; `Bearer ` is what the rule looks for
        return f"Bearer {tail}"
    return "TICKET-" + "".join(HEX[ord(c) % 16] for c in tail[:24])  # the custom rule's


KINDS = ("email", "anthropic", "aws", "github", "card", "bearer", "custom")


class Planter:
    """Draws the free text of a request; some of it carries a canary, which it remembers."""

    def __init__(self, data: st.DataObject) -> None:
        self.draw = data.draw
        self.planted: list[str] = []

    def canary(self) -> str:
        value = _canary(self.draw(st.sampled_from(KINDS)), self.draw)
        self.planted.append(value.removeprefix("Bearer "))
        return value

    def text(self, bare: bool = False) -> str:
        """Free text; about one in three holds a canary (alone when `bare`, else in words)."""
        words = self.draw(st.text(WORDS, max_size=20))
        if self.draw(st.integers(0, 2)) != 0:
            return words
        canary = self.canary()
        return canary if bare else f"{words} {canary} {self.draw(st.text(WORDS, max_size=10))}"

    def key(self) -> str:
        """A dict key of user data: a plain name, a name the API also uses, or a canary."""
        choice = self.draw(st.integers(0, 3))
        if choice == 0:
            return self.draw(st.sampled_from(["type", "role", "model", "name", "id", "text"]))
        if choice == 1:
            return self.text(bare=True)
        return self.draw(st.text(string.ascii_lowercase + "_", min_size=1, max_size=10))

    def json_value(self, depth: int = 0) -> Any:
        """User data (a tool's input, a schema): any JSON, canaries in keys and values."""
        kind = self.draw(st.integers(0, 5 if depth < 3 else 2))
        if kind == 0:
            return self.text()
        if kind == 1:
            return self.draw(st.one_of(st.integers(-1000, 1000), st.booleans(), st.none()))
        if kind == 2:
            return self.text(bare=True)
        if kind == 3:
            return [self.json_value(depth + 1) for _ in range(self.draw(st.integers(0, 3)))]
        return {self.key(): self.json_value(depth + 1) for _ in range(self.draw(st.integers(0, 4)))}

    def block(self, role: str) -> dict[str, Any]:
        kinds = ["text", "image", "document", "tool_use" if role == "assistant" else "tool_result"]
        kind = self.draw(st.sampled_from(kinds))
        if kind == "text":
            block: dict[str, Any] = {"type": "text", "text": self.text()}
        elif kind == "image":
            source = {"type": "base64", "media_type": "image/png", "data": self.text(bare=True)}
            block = {"type": "image", "source": source}
        elif kind == "document":
            source = {"type": "text", "media_type": "text/plain", "data": self.text()}
            block = {"type": "document", "source": source, "title": self.text()}
        elif kind == "tool_use":
            input_ = {self.key(): self.json_value(1) for _ in range(self.draw(st.integers(0, 4)))}
            block = {"type": "tool_use", "id": self.text(bare=True), "name": self.text(bare=True)}
            block["input"] = input_
        else:
            inner: Any = self.text()
            if self.draw(st.booleans()):
                inner = [{"type": "text", "text": self.text()}]
            block = {"type": "tool_result", "tool_use_id": self.text(bare=True), "content": inner}
            block["is_error"] = self.draw(st.booleans())
        if self.draw(st.integers(0, 4)) == 0:
            block["cache_control"] = {"type": "ephemeral"}
        return block

    def request(self) -> dict[str, Any]:
        model = self.draw(st.sampled_from(MODELS))
        if self.draw(st.integers(0, 7)) == 0:
            model = self.text(bare=True)  # a request whose model is not a model name
        body: dict[str, Any] = {"model": model, "max_tokens": self.draw(st.integers(1, 4096))}
        messages = []
        for turn in range(self.draw(st.integers(1, 4))):
            role = "user" if turn % 2 == 0 else "assistant"
            content: Any = self.text()
            if self.draw(st.booleans()):
                content = [self.block(role) for _ in range(self.draw(st.integers(1, 3)))]
            messages.append({"role": role, "content": content})
        body["messages"] = messages
        if self.draw(st.booleans()):
            body["system"] = (
                self.text()
                if self.draw(st.booleans())
                else [{"type": "text", "text": self.text(), "cache_control": {"type": "ephemeral"}}]
            )
        if self.draw(st.booleans()):
            schema = {
                "type": "object",
                "properties": {self.key(): {"type": "string", "description": self.text()}},
            }
            body["tools"] = [
                {"name": self.text(bare=True), "description": self.text(), "input_schema": schema}
            ]
            body["tool_choice"] = {"type": "tool", "name": self.text(bare=True)}
        if self.draw(st.booleans()):
            body["metadata"] = {"user_id": self.text(bare=True), self.key(): self.json_value(1)}
        if self.draw(st.booleans()):
            body["stop_sequences"] = [self.text()]
        return body


def _capture_one(store: Path, rules: Path, body: dict[str, Any], answer: str) -> None:
    """One Messages exchange through the real capture path; returns when it is on disk."""
    raw = json.dumps(body, ensure_ascii=False).encode()
    reply = json.dumps(
        {
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": answer}],
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
    ).encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": reply})

    async def receive() -> Message:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: Message) -> None:
        pass

    scope = {"type": "http", "method": "POST", "path": "/v1/messages", "headers": []}
    capture = Capture(str(store), sample=1.0, redactor=Redactor(load_rules(rules)))
    capture.start()
    asyncio.run(capture.serve(app, scope, receive, send))
    capture.close()


@settings(
    max_examples=100,
    deadline=None,
    database=None,  # no .hypothesis folder in the work tree
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_no_planted_canary_reaches_a_capture_file(data: st.DataObject) -> None:
    planter = Planter(data)
    body = planter.request()
    answer = planter.text()
    assume(planter.planted)
    with tempfile.TemporaryDirectory() as folder:
        rules = Path(folder) / "rules.txt"
        rules.write_text(CUSTOM_RULE + "\n")
        store = Path(folder) / "captures"
        _capture_one(store, rules, body, answer)
        written = b"".join(path.read_bytes() for path in store.iterdir())
        leaked = [canary for canary in planter.planted if canary.encode() in written]
        assert leaked == [], f"{len(leaked)} of {len(planter.planted)} canaries leaked"
        (record,) = [r for r in read_records(store) if isinstance(r, CapturedRequest)]
    # the API's vocabulary survived where the schema puts it
    kept = record.body
    assert [m["role"] for m in kept["messages"]] == [m["role"] for m in body["messages"]]
    for ours, theirs in zip(kept["messages"], body["messages"], strict=True):
        if isinstance(theirs["content"], list):
            assert [b["type"] for b in ours["content"]] == [b["type"] for b in theirs["content"]]
    if body["model"] in MODELS:
        assert kept["model"] == record.model == body["model"]


def test_the_three_holes_of_issue_24_are_closed() -> None:
    """The shapes the probe found: a canary as a key, under `type`/`role`/`model` in user
    data, and as the request's model (copied into the record's own `model` field)."""
    redactor = Redactor()
    body = {
        "model": "ana@example.org",
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "lookup",
                        "input": {
                            "type": "bo@example.org",
                            "role": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
                            "model": "AKIAABCDEFGHIJKLMNOP",
                            "cy@example.org": 1,
                        },
                    }
                ],
            }
        ],
        "metadata": {"user_id": "dee@example.org", "type": "eve@example.org"},
    }
    redacted = redactor.request(body)
    text = json.dumps(redacted)
    for canary in ("@example.org", "sk-ant-api03", "AKIAABCDEFGHIJKLMNOP"):
        assert canary not in text
    assert redacted["model"] == "[REDACTED:email]"
    assert redacted["messages"][0]["role"] == "user"
    assert redacted["messages"][0]["content"][0]["type"] == "tool_use"
    assert redactor.request({"model": "claude-haiku-4-5"})["model"] == "claude-haiku-4-5"
    # two keys that redact to one name are both kept
    assert len(redactor.value({"a@example.org": 1, "b@example.org": 2})) == 2
