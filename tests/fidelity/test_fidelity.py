"""The fidelity check catches every kind of lie and passes every lossless rewrite."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenlens.compress.toolout import (
    fold,
    format_marker,
    group_hits,
    minify,
    render,
    to_table,
)
from tokenlens.facts import Fact
from tokenlens.fidelity import check_body, check_text

GREP = "\n".join(
    [
        "src/app/models.py:12:class User(Base):",
        "src/app/models.py:40:    def save(self):",
        "src/app/models.py:41:        self.session.add(self)",
        "src/app/views.py:7:from app.models import User",
        "src/app/views.py:88:    user.save()",
        "tests/test_models.py:3:from app.models import User",
    ]
)
CAT_N = "\n".join(f"{n:6d}\tline {n} of the file = {n * 7}" for n in range(1, 31))
PROPS = settings(max_examples=60, deadline=None, database=None)


def _lines(text: str) -> list[str]:
    return text.split("\n")


def test_identity_and_render_pass() -> None:
    assert check_text(CAT_N, CAT_N).faithful
    coloured = "\x1b[31mERROR\x1b[0m boom   \r\nok\n\n\n"
    report = check_text(coloured, render(coloured))
    assert report.faithful and report.fabricated_lines == 0


def test_fused_line_is_fabricated_and_its_lines_unmarked() -> None:
    lines = _lines(GREP)
    fused = [*lines[:1], lines[1] + " " + lines[2].split(":", 2)[2].strip(), *lines[3:]]
    report = check_text(GREP, "\n".join(fused))
    assert report.fabricated_lines == 1
    assert report.unmarked_drops == 2


def test_line_moved_to_another_number() -> None:
    moved = GREP.replace("src/app/views.py:88:", "src/app/views.py:89:")
    report = check_text(GREP, moved)
    assert report.fabricated_lines == 1
    assert report.unmarked_drops == 1
    renumbered = CAT_N.replace("    12\tline 12", "    13\tline 12")
    assert check_text(CAT_N, renumbered).fabricated_lines == 1


def test_reordered_lines_are_caught() -> None:
    lines = _lines(CAT_N)
    lines[4], lines[9] = lines[9], lines[4]
    report = check_text(CAT_N, "\n".join(lines))
    assert not report.faithful


def test_marker_away_from_what_it_replaced() -> None:
    lines = _lines(CAT_N)
    here = "\n".join([*lines[:10], format_marker(11, 15), *lines[15:]])
    assert check_text(CAT_N, here).faithful
    assert check_text(CAT_N, here).marked_drops == 5
    at_end = "\n".join(lines[:10] + lines[15:] + [format_marker(11, 15)])
    report = check_text(CAT_N, at_end)
    assert report.fabricated_lines == 1 and report.unmarked_drops == 5
    wrong_count = "\n".join([*lines[:10], format_marker(11, 20), *lines[15:]])
    assert not check_text(CAT_N, wrong_count).faithful


def test_silent_drop() -> None:
    lines = _lines(CAT_N)
    report = check_text(CAT_N, "\n".join(lines[:3] + lines[4:]))
    assert (report.fabricated_lines, report.unmarked_drops) == (0, 1)
    report = check_text(CAT_N, "\n".join(lines[:-2]))
    assert report.unmarked_drops == 2


def test_drop_of_one_of_two_identical_lines() -> None:
    original = "a\nsame\nsame\nb"
    assert check_text(original, "a\nsame\nb").unmarked_drops == 1
    assert check_text(original, "a\nsame\n[... 1 line omitted: 3 ...]\nb").faithful
    assert check_text(original, "a\n[... 1 line omitted: 2 ...]\nsame\nb").faithful


def test_changed_number() -> None:
    changed = CAT_N.replace("= 84", "= 85")
    assert check_text(CAT_N, changed).fabricated_lines == 1
    doc = json.dumps({"name": "requests", "versions": ["2.31.0", "2.32.0", "2.32.3"], "n": 3})
    assert check_text(doc, doc.replace('"n": 3', '"n": 4')).fabricated_lines == 1
    assert check_text(doc, doc.replace('"n": 3', '"n": 3.0')).fabricated_lines == 1


def test_json_array_loses_items() -> None:
    doc = json.dumps({"versions": [f"1.{i}" for i in range(10)]}, indent=2)
    value = json.loads(doc)
    value["versions"] = value["versions"][:3] + value["versions"][5:]
    assert check_text(doc, json.dumps(value)).unmarked_drops == 2
    value["versions"].insert(3, "[... 2 items omitted: 4-5 ...]")
    assert check_text(doc, json.dumps(value)).faithful


def test_foreign_markers_are_checked_not_trusted() -> None:
    lines = _lines(CAT_N)
    honest = "\n".join([*lines[:5], "[10 lines omitted]", *lines[15:]])
    assert check_text(CAT_N, honest).faithful
    lying = "\n".join([*lines[:5], "[122 items omitted]", *lines[15:]])
    assert check_text(CAT_N, lying).fabricated_lines == 1
    summary_at_end = "\n".join(lines[:5] + lines[15:] + ["[10 lines omitted: 3 ERROR, 7 INFO]"])
    report = check_text(CAT_N, summary_at_end)
    assert report.unmarked_drops == 10 and report.fabricated_lines == 1
    total = "\n".join([*lines, "[30 lines compressed to 30. Retrieve more: hash=abc]"])
    assert check_text(CAT_N, total).faithful
    assert check_text(CAT_N, total.replace("[30 lines", "[400 lines")).fabricated_lines == 1


def test_headroom_csv_schema_decodes() -> None:
    rows = [{"name": f"pkg{i}", "version": f"1.{i}.0"} for i in range(4)]
    dense = "[4]{name:string,version:string}\n" + "\n".join(
        f"{r['name']},{r['version']}" for r in rows
    )
    assert check_text(json.dumps(rows, indent=2), dense).faithful
    assert check_text(json.dumps(rows, indent=2), dense.replace("1.2.0", "1.2.1")).fabricated_lines


def test_body_pairs_tool_results_by_id_and_checks_facts() -> None:
    def body(content: object, *, is_error: bool = False) -> dict[str, object]:
        result = {"type": "tool_result", "tool_use_id": "t1", "content": content}
        if is_error:
            result["is_error"] = True
        return {
            "messages": [
                {"role": "user", "content": "find User"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "grep", "input": {}}],
                },
                {"role": "user", "content": [result, {"type": "text", "text": "where?"}]},
            ]
        }

    facts = [Fact(kind="path_line", value="src/app/views.py:88", source="t1")]
    as_blocks = body([{"type": "text", "text": GREP}])
    assert check_body(body(GREP), as_blocks, facts).faithful
    grouped = body("\n".join(group_hits(_lines(GREP))))
    report = check_body(body(GREP), grouped, facts)
    assert report.faithful and report.facts_lost == 0
    dropped = body("\n".join([*_lines(GREP)[:4], format_marker(5, 5), *_lines(GREP)[5:]]))
    report = check_body(body(GREP), dropped, facts)
    assert report.faithful and report.facts_lost == 1
    assert check_body(body(GREP), body(GREP, is_error=True)).fabricated_lines == 1
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
    with_image = body([{"type": "text", "text": GREP}, image])
    assert check_body(with_image, body(GREP)).unmarked_drops == 1


# ---- lossless rewrites, over random outputs -------------------------------------------

_word = st.text(alphabet="abcdefgh ERORINFO:=/._-|[]x0123456789", min_size=0, max_size=12)
_line = st.one_of(_word, st.sampled_from(["", "   ", "same", "[x3] odd", "12:30 noon", "--"]))
_output = st.lists(_line, min_size=1, max_size=40)


@PROPS
@given(_output)
def test_folding_repeats_passes(lines: list[str]) -> None:
    lines = [line for line in lines for _ in range(1 + len(line) % 4)]
    original = "\n".join(lines)
    shown = render(original).split("\n")
    assert check_text(original, "\n".join(fold(shown))).faithful


@PROPS
@given(st.lists(st.tuples(st.sampled_from(["a.py", "src/b c.py", "x-1.py"]), _word), max_size=30))
def test_grouping_grep_hits_passes(hits: list[tuple[str, str]]) -> None:
    lines = [f"{path}:{n + 1}:{text}".rstrip() for n, (path, text) in enumerate(sorted(hits))]
    original = "\n".join(lines)
    assert check_text(original, "\n".join(group_hits(render(original).split("\n")))).faithful


_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(alphabet='ab |"[{-1.0 tnx', max_size=8),
)


@PROPS
@given(st.lists(st.tuples(_scalar, _scalar, _scalar), min_size=1, max_size=20))
def test_json_table_and_minify_pass(cells: list[tuple[object, object, object]]) -> None:
    rows = [{"k": k, "v": v, "w": w} for k, v, w in cells]
    original = json.dumps(rows, indent=2)
    table = to_table(rows)
    assert table is not None
    assert check_text(original, table).faithful
    minified = minify(original)
    assert minified is not None and check_text(original, minified).faithful


@settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(_output, st.randoms(use_true_random=False))
def test_marked_elisions_pass_and_unmarked_ones_fail(lines: list[str], rnd: random.Random) -> None:
    shown = render("\n".join(lines)).split("\n")
    if not shown or shown == [""]:
        return
    start = rnd.randrange(len(shown))
    end = rnd.randrange(start, len(shown))
    kept = [*shown[:start], format_marker(start + 1, end + 1), *shown[end + 1 :]]
    assert check_text("\n".join(lines), "\n".join(kept)).faithful
    silent = [*shown[:start], *shown[end + 1 :]]
    solid = [line for line in shown[start : end + 1] if line]
    report = check_text("\n".join(lines), "\n".join(silent))
    assert report.unmarked_drops == (len(solid) if solid else 0)


@pytest.mark.parametrize("unit", ["lines", "items"])
def test_marker_grammar_round_trips(unit: str) -> None:
    from tokenlens.compress.toolout import parse_marker

    for start, end in [(1, 1), (3, 9), (40, 51)]:
        marker = parse_marker(format_marker(start, end, unit))  # type: ignore[arg-type]
        assert marker is not None and (marker.start, marker.end) == (start, end)
        assert marker.count == end - start + 1
    assert parse_marker("[... 5 lines omitted: 3-9 ...]") is None  # count disagrees


def test_other_compressors_lossless_forms_decode() -> None:
    paths = "\n".join(["./a.h", "./b.h", "./net/c.h", "./net/d.h", "./e.h"])
    headed = "\n".join(["./", "a.h", "b.h", "./net/", "c.h", "d.h", "./", "e.h"])
    assert check_text(paths, headed).faithful
    assert check_text(paths, headed.replace("d.h", "x.h")).fabricated_lines == 1
    block = ["start", "  a: 1", "  b: 2", "  c: 3", "next", "  a: 1", "  b: 2", "  c: 3"]
    backref = [*block[:5], "... (repeats 3 lines from 4 lines back)"]
    assert check_text("\n".join(block), "\n".join(backref)).faithful
    runs = "x\nsame\nsame\nsame\ny"
    assert check_text(runs, "x\nsame\n... (repeated 3 times)\ny").faithful
    assert not check_text(runs, "x\nsame\n... (repeated 5 times)\ny").faithful
    doc = json.dumps({"errors": [{"shape": "A"}, {"shape": "B"}], "n": 2})
    toon = '{"errors":"[2]{shape}:\\n  A\\n  B","n":2}'
    assert check_text(doc, toon).faithful
    assert not check_text(doc, toon.replace("B", "C")).faithful


def test_a_count_may_include_the_trailing_newline() -> None:
    original = "".join(f"line {n}\n" for n in range(1, 6))
    assert check_text(
        original, "[6 lines compressed to 0. Retrieve more: hash=ab]\n[6 lines omitted]"
    ).faithful
    assert not check_text(original, "[7 lines omitted]").faithful


_solid = st.text(alphabet="abcdef0123456789 :./-=", min_size=1, max_size=10).filter(str.strip)


@PROPS
@given(st.lists(_solid, min_size=2, max_size=30), st.randoms(use_true_random=False))
def test_every_changed_or_swapped_line_is_caught(lines: list[str], rnd: random.Random) -> None:
    original = "\n".join(lines)
    shown = render(original).split("\n")
    k = rnd.randrange(len(shown))
    changed = [*shown]
    changed[k] = shown[k] + "Z"  # "Z" is in no original line
    assert check_text(original, "\n".join(changed)).fabricated_lines >= 1
    fused = [*shown[:k], shown[k] + " " + shown[(k + 1) % len(shown)], *shown[k + 1 :]]
    assert check_text(original, "\n".join(fused)).fabricated_lines >= 1
    j = rnd.randrange(len(shown))
    if shown[j] != shown[k]:
        swapped = [*shown]
        swapped[j], swapped[k] = swapped[k], swapped[j]
        assert not check_text(original, "\n".join(swapped)).faithful


@PROPS
@given(st.lists(_line, min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_codecs_and_markers_combined_pass(lines: list[str], rnd: random.Random) -> None:
    """A compressor that folds repeats and elides several marked ranges passes."""
    original = "\n".join(lines)
    if not render(original):
        return  # nothing visible to elide
    shown = render(original).split("\n")
    out: list[str] = []
    i = 0
    while i < len(shown):
        if rnd.random() < 0.2:
            end = min(len(shown), i + rnd.randrange(1, 5))
            out.append(format_marker(i + 1, end))
            i = end
        else:
            out.append(shown[i])
            i += 1
    folded = fold(out)
    assert check_text(original, "\n".join(folded)).faithful


def test_a_log_line_that_starts_like_json_is_read_as_lines() -> None:
    original = "\n".join(f"[{n}] step {n} done" for n in range(1, 9))
    lines = original.split("\n")
    assert check_text(original, "\n".join([*lines[:2], format_marker(3, 6), *lines[6:]])).faithful
    assert check_text(original, "\n".join([*lines[:2], *lines[6:]])).unmarked_drops == 4


@PROPS
@given(
    st.lists(st.tuples(_scalar, _scalar), min_size=2, max_size=25),
    st.randoms(use_true_random=False),
)
def test_marked_items_of_a_json_array_pass(
    cells: list[tuple[object, object]], rnd: random.Random
) -> None:
    rows = [{"name": a, "version": b} for a, b in cells]
    original = json.dumps(rows, indent=2)
    start = rnd.randrange(len(rows))
    end = rnd.randrange(start, len(rows))
    kept: list[object] = [*rows[:start], format_marker(start + 1, end + 1, "items")]
    kept += rows[end + 1 :]
    assert check_text(original, json.dumps(kept)).faithful
    table = to_table(rows)
    assert table is not None
    head, *body = table.split("\n")
    marked = [head, *body[:start], format_marker(start + 1, end + 1, "items"), *body[end + 1 :]]
    assert check_text(original, "\n".join(marked)).faithful
    silent = [head, *body[:start], *body[end + 1 :]]
    assert check_text(original, "\n".join(silent)).unmarked_drops >= 1
