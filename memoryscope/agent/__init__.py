"""A MemGPT-style agent over MemoryScope: core memory, its tools, the context window and the step loop."""

__all__: list[str] = []
