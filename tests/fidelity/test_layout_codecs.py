"""Shared-prefix runs and left-out line numbers decode exactly, and the check reads them."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenlens.compress.toolout.lines import is_marker_or_fold
from tokenlens.compress.toolout.markers import format_marker, format_value_marker
from tokenlens.compress.toolout.numbered import HEADER, drop_numbers, restore_numbers
from tokenlens.compress.toolout.prefix import expand_prefixes, group_prefixes, heading_line
from tokenlens.compress.toolout.render import render_lines
from tokenlens.compress.toolout.rungs import ToolArm, compress_tool_text
from tokenlens.facts import Fact
from tokenlens.fidelity import check_text

PROPS = settings(max_examples=80, deadline=None, database=None)
_stamp = st.sampled_from(["2026-12-05 03:53:39 ", "2026-12-05 03:53:40 ", "-rw-r--r-- 1 root "])
_rest = st.text(alphabet='ab :"/x0123456789[].\t', min_size=0, max_size=14)
_log_line = st.one_of(st.tuples(_stamp, _rest).map("".join), _rest)
_code = st.text(alphabet="abc ()=:#\"'\t0123456789→", min_size=0, max_size=20)


@PROPS
@given(st.lists(_log_line, min_size=1, max_size=60))
def test_prefix_runs_round_trip_and_pass(lines: list[str]) -> None:
    shown = render_lines("\n".join(lines))
    grouped = group_prefixes(shown, is_marker_or_fold)
    assert expand_prefixes(grouped) == shown
    assert check_text("\n".join(lines), "\n".join(grouped)).faithful


def test_dpkg_log_is_grouped_by_its_timestamp() -> None:
    lines = [
        f"2026-12-05 03:53:{n // 5:02d} status installed pkg{n}:amd64 1.{n}-1" for n in range(30)
    ]
    out = group_prefixes(lines, is_marker_or_fold)
    assert out[0] == heading_line(5, "2026-12-05 03:53:00 status installed ")
    assert out[1] == "pkg0:amd64 1.0-1"
    assert len(out) == 36  # six seconds, five lines each, one heading each


def test_a_wrong_prefix_or_count_is_caught() -> None:
    lines = [f"2026-12-05 03:53:39 status installed pkg{n}" for n in range(6)]
    original = "\n".join(lines)
    good = group_prefixes(lines, is_marker_or_fold)
    assert check_text(original, "\n".join(good)).faithful
    other_second = [good[0].replace("03:53:39", "03:53:38"), *good[1:]]
    assert check_text(original, "\n".join(other_second)).fabricated_lines == 6
    too_few = [good[0].replace("next 6", "next 5"), *good[1:]]
    assert not check_text(original, "\n".join(too_few)).faithful


def test_an_original_line_shaped_like_a_heading_reads_as_itself() -> None:
    lines = [
        heading_line(2, "x "),
        "x a",
        "x b",
        *[f"2026-12-05 status line {n}" for n in range(9)],
    ]
    assert group_prefixes(lines, is_marker_or_fold) == lines  # never grouped: ambiguous
    assert check_text("\n".join(lines), "\n".join(lines[:1] + lines[3:])).unmarked_drops == 2


def _numbered(texts: list[str], sep: str, start: int) -> list[str]:
    return [f"{start + k:6d}{sep}{text}" for k, text in enumerate(texts)]


@PROPS
@given(
    st.lists(_code, min_size=1, max_size=60),
    st.sampled_from(["\t", "→"]),
    st.integers(1, 2000),
    st.randoms(use_true_random=False),
)
def test_left_out_numbers_round_trip_with_markers(
    texts: list[str], sep: str, start: int, rnd: random.Random
) -> None:
    original = "\n".join(_numbered(texts, sep, start))
    shown = render_lines(original)
    if not any(text.strip() for text in texts):
        return  # no line shows its separator: not read as numbered
    kept: list[str] = []
    i = 0
    while i < len(shown):
        if rnd.random() < 0.15 and i + 3 <= len(shown):
            end = i + rnd.randrange(3, 6)
            end = min(end, len(shown))
            kept.append(format_marker(i + 1, end))
            i = end
        else:
            kept.append(shown[i])
            i += 1
    out = drop_numbers(kept, is_marker_or_fold)
    if out is None:  # only when no line kept shows the separator
        assert not any(sep in line for line in kept if not is_marker_or_fold(line))
        return
    assert out[0] == HEADER
    assert restore_numbers(out, is_marker_or_fold) == kept
    assert check_text(original, "\n".join(out)).faithful


def test_numbers_kept_where_a_reader_needs_them() -> None:
    texts = ["import sys", "", "x = 1", "class A:", "    def f(self):", *["    pass"] * 20]
    shown = render_lines("\n".join(_numbered(texts, "\t", 1)))
    out = drop_numbers(shown, is_marker_or_fold)
    assert out is not None
    numbered = [line for line in out[1:] if line[:6].strip().isdigit()]
    assert [line[:6].strip() for line in numbered] == ["1", "4", "5", "10", "20", "25"]
    assert out[2] == "" and out[3] == "x = 1"  # the others: the text alone


def test_a_changed_or_shifted_line_under_left_out_numbers_is_caught() -> None:
    original = "\n".join(_numbered([f"value_{n} = {n}" for n in range(40)], "\t", 1))
    out = drop_numbers(original.split("\n"), is_marker_or_fold)
    assert out is not None
    changed = [*out]
    changed[3] = "value_2 = 3"
    assert check_text(original, "\n".join(changed)).fabricated_lines == 1
    shifted = [*out[:3], *out[4:]]  # line 3 gone: every later unnumbered line one off
    assert not check_text(original, "\n".join(shifted)).faithful


def test_a_fact_on_an_unnumbered_line_is_kept() -> None:
    """The fact check reads the decoded lines: a line number left out is not a fact lost."""
    texts = [f"CONSTANT_{n} = {n * 3}" for n in range(30)]
    original = "\n".join(_numbered(texts, "\t", 1))
    out = compress_tool_text(original, ToolArm.parse("lossless"))
    assert "    12\t" not in out
    at_line = Fact(kind="text", value="12 CONSTANT_11 = 33")
    assert check_text(original, out, [at_line]).facts_lost == 0
    gone = "\n".join([*out.split("\n")[:12], format_marker(12, 12), *out.split("\n")[13:]])
    assert check_text(original, gone, [at_line]).facts_lost == 1


def test_a_long_json_string_gives_way_to_a_marker_naming_its_length() -> None:
    doc = {
        "operations": {
            f"Op{n}": {"http": {"method": "POST"}, "documentation": f"<p>{'words ' * 80}{n}</p>"}
            for n in range(6)
        }
    }
    original = json.dumps(doc, indent=4)
    gentle = compress_tool_text(original, ToolArm.parse("elide@0.9"))
    assert "chars omitted" not in gentle  # 488 characters: kept below 1,000
    out = compress_tool_text(original, ToolArm.parse("elide@0.5"))
    value = json.loads(out)
    marker = value["operations"]["Op3"]["documentation"]
    assert marker == format_value_marker(doc["operations"]["Op3"]["documentation"])
    assert value["operations"]["Op3"]["http"] == {"method": "POST"}
    report = check_text(original, out, [Fact(kind="name", value="POST")])
    assert report.faithful and report.marked_drops == 6 and report.facts_lost == 0
    wrong = out.replace(marker, marker.replace("of 488", "of 588"), 1)
    assert wrong != out and check_text(original, wrong).fabricated_lines == 1


def test_a_line_number_or_a_marker_range_equal_to_a_number_does_not_keep_it() -> None:
    """`SUBDEBUG = 5` removed: line 5's number, or a marker's `5`, is not the value 5."""
    texts = ["# a comment"] * 28 + ["SUBDEBUG = 5", "", "x = 1"]
    original = "\n".join(_numbered(texts, "\t", 1))
    fact = Fact(kind="number", value="5")
    shown = render_lines(original)
    kept = [*shown[:25], format_marker(26, 30), shown[30]]
    out = drop_numbers(kept, is_marker_or_fold)
    assert out is not None and check_text(original, "\n".join(out)).faithful
    assert check_text(original, "\n".join(out), [fact]).facts_lost == 1
    assert check_text(original, "\n".join(kept), [fact]).facts_lost == 1  # numbers shown
    assert (
        check_text(
            original, compress_tool_text(original, ToolArm.parse("lossless")), [fact]
        ).facts_lost
        == 0
    )
    line = Fact(kind="number", value="31")  # stated only as a line number: read as one
    assert check_text(original, "\n".join(out), [line]).facts_lost == 0
    assert check_text(original, "\n".join(out[:-1]), [line]).facts_lost == 1
