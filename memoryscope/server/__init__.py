"""`memoryscope serve`: the configured memory service over HTTP, for many users at once.

`memoryscope.server.app.create_app(scope, ...)` builds the FastAPI application; `access` holds
the API keys and their scopes, `limits` the request limits, `metrics` the Prometheus figures.
"""
