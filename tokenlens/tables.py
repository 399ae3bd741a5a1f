"""The schema of every table the calibration writes, defined once.

Each stage of the flow writes one Parquet table under the store root; this module is
the single owner of their columns and types (bump `TABLES_VERSION` on any change).
"""

from __future__ import annotations

import pyarrow as pa

TABLES_VERSION = 1

#: One row per judged pair: a (task, arm, replicate) cell. For the control arm
#: `grade_clear` is the first cleartext answer's grade and `grade_comp` the second's.
GRADES = pa.schema(
    [
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("task_class", pa.string(), nullable=False),
        pa.field("arm", pa.string(), nullable=False),  # Arm.key, e.g. "prune@0.6" / "control"
        pa.field("method", pa.string(), nullable=False),
        pa.field("rate", pa.float64()),
        pa.field("replicate", pa.int32(), nullable=False),
        pa.field("judge", pa.string(), nullable=False),  # "metric" or the judge model id
        pa.field("grade_clear", pa.float64()),  # 0-100; null on error
        pa.field("grade_comp", pa.float64()),  # 0-100; null on error
        pa.field("reduction", pa.float64()),  # measured token reduction of this task x arm, 0-1
        pa.field("tokens_clear", pa.int64()),
        pa.field("tokens_comp", pa.int64()),
        pa.field("note", pa.string()),
        pa.field("error", pa.string()),  # why the row has no grades; null when fine
    ]
)
