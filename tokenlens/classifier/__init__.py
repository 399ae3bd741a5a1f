"""The request classifier: which task class a Messages API body belongs to, or "unsure".

* `rules`: hand-written rules on the request's shape and wording (the fallback).
* `features`: the hashed features the learned classifier reads (shared by fit and proxy).
* `bundle`: the fitted classifier as plain data, with numpy inference (proxy side).
* `fit`: fitting and threshold choice by cross-validation (scikit-learn; calibration side).
* `classify`: one live request's class: the header, then the bundle or the rules, then
  `default` (the proxy's hot path and the policy-as-applied check both call it).
* `evaluate`: confusion matrix, right / unsure / wrong and latency on a task file.

Importing this package imports none of them; the proxy imports `bundle` (pydantic only,
numpy on first use), never `fit`.
"""
