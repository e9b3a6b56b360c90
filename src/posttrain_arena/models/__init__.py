"""Chat model clients: OpenAI-compatible endpoints, local transformers, scripted replay."""

from posttrain_arena.models.base import (
    ChatModel,
    ChatResponse,
    ContextOverflow,
    ModelError,
    ProviderError,
    RequestRejected,
    SamplingParams,
    ToolCall,
    Usage,
)
from posttrain_arena.models.spec import load_model

__all__ = [
    "ChatModel",
    "ChatResponse",
    "ContextOverflow",
    "ModelError",
    "ProviderError",
    "RequestRejected",
    "SamplingParams",
    "ToolCall",
    "Usage",
    "load_model",
]
