"""MemoryScope: long-term memory for LLM chatbots and agents."""

__version__ = "0.2.0"
