"""The Anthropic-compatible proxy: applies the published policy per request, fails open.

`tokenlens.proxy.app.create_app(settings)` builds the ASGI app; `tokenlens serve` runs it.
Nothing here imports prefect, pandas, pyarrow or `flows`.
"""
