"""`memoryscope serve`: the configured memory service over HTTP, for many users at once.

- `app`: `create_app(scope)`, the FastAPI application, and its shutdown;
- `routes_memory`, `routes_ops`, `routes_chat`, `routes_health`: the endpoints; `schemas` their bodies;
- `state`: what handlers share, and the calling key (`Caller`); `access`: API keys and scopes;
  `limits`: per-key rates;
- `errors`: the JSON error shape and the library's errors as statuses; `middleware`: the ASGI
  layers under the app (metrics, body size, ids in paths, shutdown cut-off);
- `metrics`: the Prometheus figures; `running`: uvicorn, stopping as promised.
"""
