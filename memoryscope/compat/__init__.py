"""MemoryScope 0.1.x, as its users wrote it: `Arguments`, the flag-form command line, and the
keyword inputs of its operations, each mapped onto this version's config and service.

The 0.1.x *config* vocabulary (`core.*` class paths, `openai_generation`, ...) is translated in
`memoryscope.config.legacy`; this package covers what 0.1.x users wrote in Python and on the
command line.
"""

from memoryscope.compat.arguments import Arguments, apply_arguments, arguments_from_fields, validated_arguments

__all__ = ["Arguments", "apply_arguments", "arguments_from_fields", "validated_arguments"]
