"""The calibration's stages as plain functions; `flows.calibrate` wraps each in a Prefect task.

Modules: `cells` (which answers and judge pairs a run needs, and their seeds), `store`
(Parquet tables under the store root), `stages` (load, compress, sample, judge, aggregate,
publish), `defaults` (the offline default run), `progress` (progress reporting).
"""
