"""Chat model clients: OpenAI-compatible endpoints, local transformers, scripted replay."""

from posttrain_arena.models.base import (
    ChatModel,
    ChatResponse,
    ModelError,
    ProviderError,
    SamplingParams,
    ToolCall,
    Usage,
)
from posttrain_arena.models.spec import load_model

__all__ = [
    "ChatModel",
    "ChatResponse",
    "ModelError",
    "ProviderError",
    "SamplingParams",
    "ToolCall",
    "Usage",
    "load_model",
]
