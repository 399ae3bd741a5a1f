"""The blind judge: grades two answers to the same request against a reference.

Why it is built this way:

* Blind. The prompt never says where either answer came from, so we measure the answers
  and not the judge's prior about how they were produced. It shows the request the user
  actually sent (never a reduced form of it), so an answer that is faithful to a damaged
  prompt is still graded against what was asked.
* Position from a hash. Judges favour a position; which answer is shown as A is decided
  by sha256 of the case key, so the bias cannot line up with one arm and reruns shuffle
  identically. `both_orders` grades each pair in both positions and averages.
* Reasoning first. The JSON schema lists `reasoning` before the grades; schemas fill in
  order, so the judge argues before it scores. Grade bounds are checked here, after the
  call (Anthropic's structured outputs reject `minimum`/`maximum` on integers); a missing
  or out-of-range grade raises `JudgeError` and is never turned into a 0.

The proxy's shadow judge imports this module, so it imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from tokenlens import metric
from tokenlens.errors import JudgeError
from tokenlens.models.base import CompletionRequest, Message, ModelClient

#: Bump on any change to the prompt or schema: the ledger keys judge calls with it.
JUDGE_PROMPT_VERSION = "judge-v1"

#: Size bounds of the judge prompt's sections, in characters (head and tail are kept).
MAX_REQUEST_CHARS = 16_000
MAX_REFERENCE_CHARS = 4_000
MAX_ANSWER_CHARS = 6_000
JUDGE_MAX_TOKENS = 700

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {
            "type": "string",
            "description": "Two or three sentences comparing both answers with the request "
            "and the reference, written before deciding any grade.",
        },
        "grade_a": {
            "type": "integer",
            "description": "Quality of ANSWER A as an integer from 0 to 100.",
        },
        "grade_b": {
            "type": "integer",
            "description": "Quality of ANSWER B as an integer from 0 to 100, on the same "
            "standard as A.",
        },
        "note": {
            "type": "string",
            "description": "One short sentence: the single biggest difference between the "
            "two answers.",
        },
    },
    "required": ["reasoning", "grade_a", "grade_b", "note"],
    "additionalProperties": False,
}

JUDGE_SYSTEM = (
    "You are a strict, fair grader of answers. You receive a user's request, a reference "
    "answer written by an expert, and two candidate answers, A and B, to that request. "
    "Grade each candidate from 0 to 100 for how well it serves the request: factual "
    "agreement with the reference, completeness, and following every instruction in the "
    "request. Grade the two independently and on the same standard; do not reward length, "
    "style or confidence, and do not let the order of the candidates matter. Write your "
    "reasoning first, then the grades, then one short note naming the single biggest "
    "difference between the two answers."
)

_TAGS = ("request", "reference", "answer_a", "answer_b")


def trim_middle(text: str, limit: int) -> str:
    """Bound `text` to about `limit` characters, keeping head and tail and marking the cut.

    The start of a request usually states the task and its end the question, so the
    middle is what goes.
    """
    if limit < 64:
        raise ValueError(f"limit must be at least 64 characters, got {limit}")
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    marker = f"\n[... {cut} characters cut from the middle ...]\n"
    keep = max(limit - len(marker), 32)
    head = keep * 3 // 5
    tail = keep - head
    return text[:head] + marker + text[len(text) - tail :]


def _defang(text: str) -> str:
    """Stop content from closing or opening one of our section tags."""
    for tag in _TAGS:
        text = text.replace(f"</{tag}>", f"</ {tag}>").replace(f"<{tag}>", f"< {tag}>")
    return text


def _block_text(content: str | list[dict[str, Any]] | Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or ():
        if isinstance(block, Mapping):
            if block.get("type", "text") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(f"[{block.get('type', 'block')} content]")
        else:
            parts.append(str(block))
    return "\n\n".join(parts)


def render_request_text(body: Mapping[str, Any]) -> str:
    """The text of a Messages API body as the judge should read it.

    System prompt, earlier turns, then the last user turn (context blocks and the
    question), each labelled by role. Pass the body the application sent, never a
    reduced one.
    """
    sections: list[str] = []
    system = body.get("system")
    if system:
        sections.append("[system]\n" + _block_text(system))
    for message in body.get("messages", ()):
        if isinstance(message, Message):
            role, content = message.role, message.content
        else:
            role, content = message.get("role", "user"), message.get("content", "")
        sections.append(f"[{role}]\n" + _block_text(content))
    return "\n\n".join(sections)


def build_judge_prompt(
    original_request_text: str, reference: str, answer_a: str, answer_b: str
) -> str:
    """The judge's user text: four tagged sections, each bounded in size."""
    return (
        "Grade the two candidate answers to the request below.\n\n"
        f"<request>\n{_defang(trim_middle(original_request_text, MAX_REQUEST_CHARS))}\n"
        "</request>\n\n"
        f"<reference>\n{_defang(trim_middle(reference, MAX_REFERENCE_CHARS))}\n</reference>\n\n"
        f"<answer_a>\n{_defang(trim_middle(answer_a, MAX_ANSWER_CHARS))}\n</answer_a>\n\n"
        f"<answer_b>\n{_defang(trim_middle(answer_b, MAX_ANSWER_CHARS))}\n</answer_b>\n"
    )


def build_judge_request(
    original_request_text: str,
    reference: str,
    answer_a: str,
    answer_b: str,
    *,
    model: str,
) -> CompletionRequest:
    """One deterministic (temperature 0), schema-constrained judge call."""
    prompt = build_judge_prompt(original_request_text, reference, answer_a, answer_b)
    return CompletionRequest(
        model=model,
        system=JUDGE_SYSTEM,
        messages=(Message(role="user", content=prompt),),
        max_tokens=JUDGE_MAX_TOKENS,
        temperature=0.0,
        json_schema=JUDGE_SCHEMA,
    )


def case_key(task_id: str, arm: str, replicate: int) -> str:
    """The key that fixes a pair's A/B position: ``task:arm:replicate``."""
    return f"{task_id}:{arm}:{replicate}"


def swap_for(key: str) -> bool:
    """True when the cleartext answer is shown as B (decided by sha256 of the case key)."""
    return hashlib.sha256(key.encode("utf-8")).digest()[-1] & 1 == 1


class Verdict(BaseModel):
    """One parsed judge response, positions as shown (A and B)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reasoning: str
    grade_a: int
    grade_b: int
    note: str


def _grade(raw: Mapping[str, Any], field: str, where: str) -> int:
    if field not in raw or raw[field] is None:
        raise JudgeError(f"{where}: judge response has no '{field}'")
    value = raw[field]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise JudgeError(f"{where}: '{field}' is {value!r}, not an integer 0-100")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise JudgeError(f"{where}: '{field}' is {value!r}, not an integer 0-100")
    if not 0 <= value <= 100:
        raise JudgeError(f"{where}: '{field}' is {value!r}, outside 0-100")
    return int(value)


def parse_verdict(parsed: Mapping[str, Any] | None, text: str, *, where: str) -> Verdict:
    """Validate a judge response (the backend's parsed JSON, else the raw text)."""
    raw: Any = parsed
    if raw is None:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise JudgeError(f"{where}: judge response is not JSON ({exc.msg})") from exc
    if not isinstance(raw, Mapping):
        raise JudgeError(f"{where}: judge response is {type(raw).__name__}, not an object")
    grade_a = _grade(raw, "grade_a", where)
    grade_b = _grade(raw, "grade_b", where)
    reasoning, note = raw.get("reasoning"), raw.get("note")
    if not isinstance(reasoning, str) or not isinstance(note, str):
        raise JudgeError(f"{where}: judge response lacks 'reasoning' or 'note' text")
    return Verdict(reasoning=reasoning, grade_a=grade_a, grade_b=grade_b, note=note)


class Position(BaseModel):
    """One judgement as shown: which side held the cleartext answer, and the raw grades."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    clear_is_b: bool
    grade_a: float
    grade_b: float


class PairGrade(BaseModel):
    """A judged pair, mapped back from positions to cleartext / compressed answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    grade_clear: float
    grade_comp: float
    reasoning: str
    note: str
    positions: tuple[Position, ...]


class Judge(Protocol):
    """Anything that grades a pair. `name` goes into the grades table's `judge` column."""

    name: str

    def grade_pair(
        self,
        *,
        case_key: str,
        original_request_text: str,
        reference: str,
        answer_clear: str,
        answer_comp: str,
        both_orders: bool = False,
    ) -> PairGrade: ...


class LLMJudge:
    """A model as judge, through any `ModelClient` (Anthropic, local, or a test fake)."""

    def __init__(self, client: ModelClient, model: str) -> None:
        self.client = client
        self.model = model
        self.name = model

    def _judge_once(
        self, key: str, request_text: str, reference: str, clear: str, comp: str, clear_is_b: bool
    ) -> tuple[Verdict, Position]:
        answer_a, answer_b = (comp, clear) if clear_is_b else (clear, comp)
        request = build_judge_request(request_text, reference, answer_a, answer_b, model=self.model)
        completion = self.client.complete(request)
        verdict = parse_verdict(completion.parsed, completion.text, where=f"judge {key}")
        position = Position(clear_is_b=clear_is_b, grade_a=verdict.grade_a, grade_b=verdict.grade_b)
        return verdict, position

    def grade_pair(
        self,
        *,
        case_key: str,
        original_request_text: str,
        reference: str,
        answer_clear: str,
        answer_comp: str,
        both_orders: bool = False,
    ) -> PairGrade:
        """Grade one pair; with `both_orders` judge it in both positions and average."""
        first_b = swap_for(case_key)
        orders = (first_b, not first_b) if both_orders else (first_b,)
        verdicts: list[Verdict] = []
        positions: list[Position] = []
        for clear_is_b in orders:
            verdict, position = self._judge_once(
                case_key, original_request_text, reference, answer_clear, answer_comp, clear_is_b
            )
            verdicts.append(verdict)
            positions.append(position)
        clear = [p.grade_b if p.clear_is_b else p.grade_a for p in positions]
        comp = [p.grade_a if p.clear_is_b else p.grade_b for p in positions]
        return PairGrade(
            judge=self.name,
            grade_clear=sum(clear) / len(clear),
            grade_comp=sum(comp) / len(comp),
            reasoning="\n".join(v.reasoning for v in verdicts),
            note=verdicts[0].note,
            positions=tuple(positions),
        )


Scorer = Callable[[str, str], float]


class MetricJudge:
    """The reference-metric judge: `tokenlens.metric.score` of each answer vs the reference.

    No model call and symmetric in position, so `both_orders` changes nothing. The
    scorer can be injected (tests).
    """

    name = "metric"

    def __init__(self, scorer: Scorer | None = None) -> None:
        self._scorer: Scorer = scorer if scorer is not None else metric.score

    def _score(self, answer: str, reference: str, key: str) -> float:
        value = self._scorer(answer, reference)
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise JudgeError(f"metric {key}: score {value!r} is not a number")
        if not 0.0 <= value <= 100.0:
            raise JudgeError(f"metric {key}: score {value!r} is outside 0-100")
        return float(value)

    def grade_pair(
        self,
        *,
        case_key: str,
        original_request_text: str,
        reference: str,
        answer_clear: str,
        answer_comp: str,
        both_orders: bool = False,
    ) -> PairGrade:
        del original_request_text, both_orders  # a reference metric reads neither
        clear = self._score(answer_clear, reference, case_key)
        comp = self._score(answer_comp, reference, case_key)
        return PairGrade(
            judge=self.name,
            grade_clear=clear,
            grade_comp=comp,
            reasoning="reference-metric overlap of each answer with the reference",
            note=f"metric {clear:.0f} vs {comp:.0f}",
            positions=(Position(clear_is_b=False, grade_a=clear, grade_b=comp),),
        )
