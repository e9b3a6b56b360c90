"""PostTrain Arena: measure what language models learn from contributed task environments."""

__version__ = "0.1.0"
