"""The worker library: one module per worker, registered by name."""
