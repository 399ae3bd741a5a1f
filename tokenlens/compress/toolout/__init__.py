"""Tool-output codecs: rewrites with an exact decode, and the elision marker.

The fidelity check (`tokenlens.fidelity`) decodes with these; a compressor of tool output
encodes with them. Each module is one family: `render` (what a terminal shows: ANSI
codes, carriage-return overwrites, trailing blanks), `lines` (repeated lines folded with
a count, grep hits grouped under their file), `prefix` (runs of lines sharing a prefix,
said once), `numbered` (numbered file reads with most numbers left out), `jsoncodec`
(minified JSON, a JSON array of objects as a table) and `markers` (the marker grammar).
docs/fidelity.md describes each rewrite and the marker for users.
"""

from tokenlens.compress.toolout.jsoncodec import from_table, minify, same, to_table
from tokenlens.compress.toolout.lines import expand_fold, fold, group_hits, ungroup_hits
from tokenlens.compress.toolout.markers import Marker, format_marker, parse_any, parse_marker
from tokenlens.compress.toolout.numbered import drop_numbers, restore_numbers
from tokenlens.compress.toolout.prefix import expand_prefixes, group_prefixes
from tokenlens.compress.toolout.render import render, render_lines

__all__ = [
    "Marker",
    "drop_numbers",
    "expand_fold",
    "expand_prefixes",
    "fold",
    "format_marker",
    "from_table",
    "group_hits",
    "group_prefixes",
    "minify",
    "parse_any",
    "parse_marker",
    "render",
    "render_lines",
    "restore_numbers",
    "same",
    "to_table",
    "ungroup_hits",
]
