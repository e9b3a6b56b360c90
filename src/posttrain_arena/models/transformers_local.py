"""A local transformers chat model (CPU or GPU) with exact token records.

Prompts are rendered by the tokenizer's own chat template, with the tools declared the
standard way (`apply_chat_template(messages, tools=..., add_generation_prompt=True)`),
and the model's answer is parsed back into tool calls from the template's own format
(Qwen/Hermes `<tool_call>` blocks). Every turn records the exact prompt ids, completion
ids (up to and including the end-of-turn token) and the log-probability of each
completion id under the sampling distribution (logits / temperature; plain logits when
greedy), before top-p truncation: the quantity GRPO's ratio needs.

With `prefix_ids` (the ids of the conversation so far, as generated) the next prompt
continues from them exactly and only the messages added since are tokenised, so a
multi-turn episode is one token sequence the model really saw. torch and transformers
are imported lazily.

Turns of concurrent trials (threads) are generated together by a `BatchedGenerator`
(models/batching.py); with `max_batch=None` each turn is one `model.generate` call under
a lock instead, the reference path the batched one is tested against.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posttrain_arena.models.base import (
    ChatResponse,
    ContextOverflow,
    ModelError,
    SamplingParams,
    Usage,
)
from posttrain_arena.models.batching import DEFAULT_MAX_BATCH, BatchedGenerator
from posttrain_arena.models.toolcalls import decode_arguments, parse_tool_calls


class TransformersChatModel:
    """Chat with a causal LM loaded in this process."""

    def __init__(self, model: Any, tokenizer: Any, *, name: str = "hf",
                 max_batch: int | None = DEFAULT_MAX_BATCH) -> None:
        """`max_batch`: most turns of concurrent callers generated together; None runs
        each turn alone through transformers' `generate` (one at a time)."""
        if getattr(tokenizer, "chat_template", None) is None:
            raise ModelError(f"{name}: the tokenizer has no chat_template; the model agent "
                             "needs one to render conversations and tools")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self._lock = threading.Lock()
        eos = tokenizer.eos_token_id
        self.eos_ids: list[int] = [eos] if eos is not None else []
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        for extra in gen_eos if isinstance(gen_eos, list) else [gen_eos]:
            if extra is not None and extra not in self.eos_ids:
                self.eos_ids.append(int(extra))
        if not self.eos_ids:
            raise ModelError(f"{name}: the tokenizer defines no eos_token; set one")
        self.pad_id: int = (tokenizer.pad_token_id if tokenizer.pad_token_id is not None
                            else self.eos_ids[0])
        self.batcher = (BatchedGenerator(model, eos_ids=self.eos_ids, pad_id=self.pad_id,
                                         max_batch=max_batch)
                        if max_batch is not None else None)

    @classmethod
    def from_pretrained(
        cls, path: Path | str, *, device: str | None = None, dtype: str = "auto",
        max_batch: int | None = DEFAULT_MAX_BATCH,
    ) -> TransformersChatModel:
        """Load a local model directory (nothing is downloaded)."""
        path = Path(path)
        if not (path / "config.json").is_file():
            raise ModelError(f"{path} is not a transformers model directory (no config.json)")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype,
                                                         local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load model from {path}: {exc}") from exc
        model.to(device)  # type: ignore[arg-type]
        model.eval()
        return cls(model, tokenizer, name=f"hf:{path}", max_batch=max_batch)

    @property
    def context_limit(self) -> int | None:
        """The model's positions (`max_position_embeddings`): a longer sequence is one it
        was never built to read."""
        limit = getattr(self.model.config, "max_position_embeddings", None)
        return int(limit) if isinstance(limit, int) and limit > 0 else None

    # -- rendering -------------------------------------------------------------------

    def render(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
    ) -> str:
        """The conversation as the chat template writes it."""
        text = self.tokenizer.apply_chat_template(
            [hf_message(m) for m in messages],
            tools=list(tools) if tools else None,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
        )
        return str(text)

    def encode(self, text: str) -> list[int]:
        """Token ids of template text (the template already holds any special tokens)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        prefix_ids: Sequence[int] | None = None,
    ) -> list[int]:
        """Ids of the next prompt; continues `prefix_ids` exactly when given."""
        full = self.render(messages, tools)
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"),
                   default=None)
        if prefix_ids and last is not None:
            through = self.render(messages[: last + 1], tools, add_generation_prompt=False)
            if full.startswith(through):
                eos_text = self.tokenizer.eos_token or ""
                cut = through.rfind(eos_text) if eos_text else -1
                tail = through[cut + len(eos_text):] if cut >= 0 else ""
                prefix = list(prefix_ids)
                if prefix[-1] not in self.eos_ids:
                    prefix.append(self.eos_ids[0])  # a truncated turn is closed explicitly
                return prefix + self.encode(tail + full[len(through):])
        return self.encode(full)

    def completion_ids(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> list[int]:
        """Ids the model would generate for the last (assistant) message: its rendered
        body plus the end-of-turn token. Used to write training targets."""
        if not messages or messages[-1].get("role") != "assistant":
            raise ModelError("completion_ids needs a conversation ending in an assistant turn")
        before = self.render(messages[:-1], tools)
        full = self.render(messages, tools, add_generation_prompt=False)
        eos_text = self.tokenizer.eos_token or ""
        if not full.startswith(before) or eos_text not in full[len(before):]:
            raise ModelError(f"{self.name}: the chat template does not render an assistant "
                             "turn as generation prompt + body + eos; cannot split it")
        body = full[len(before):]
        return [*self.encode(body[: body.rindex(eos_text)]), self.eos_ids[0]]

    def conversation_tokens(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> tuple[list[int], list[int]]:
        """(ids, mask) of a whole conversation exactly as the model agent would record
        it: each prompt continues the previous ids, mask 1 on assistant completions.
        Ends after the last assistant turn. Training on these matches inference."""
        ids: list[int] = []
        mask: list[int] = []
        for i, message in enumerate(messages):
            if message.get("role") != "assistant":
                continue
            prompt = self.prompt_ids(messages[:i], tools, prefix_ids=ids or None)
            if prompt[: len(ids)] != ids:
                raise ModelError(f"{self.name}: the chat template re-renders earlier turns "
                                 "differently; conversations cannot be one token sequence")
            added = prompt[len(ids):]
            completion = self.completion_ids(messages[: i + 1], tools)
            ids += added + completion
            mask += [0] * len(added) + [1] * len(completion)
        return ids, mask

    # -- generation ------------------------------------------------------------------

    def chat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        sampling: SamplingParams | None = None,
        prefix_ids: Sequence[int] | None = None,
    ) -> ChatResponse:
        """Sample the next assistant turn and record its exact tokens."""
        sampling = sampling or SamplingParams()
        ids = self.prompt_ids(messages, tools, prefix_ids)
        limit = self.context_limit
        if limit is not None:
            if len(ids) >= limit:
                raise ContextOverflow(f"{self.name}: the prompt has {len(ids)} tokens; the "
                                      f"model reads at most {limit}")
            if len(ids) + sampling.max_new_tokens > limit:  # generate only what fits
                sampling = sampling.model_copy(update={"max_new_tokens": limit - len(ids)})
        completion, logprobs = self.generate(ids, sampling)
        ended = bool(completion) and completion[-1] in self.eos_ids
        body = completion[:-1] if ended else completion
        text = self.tokenizer.decode(body, skip_special_tokens=False)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        content, calls = parse_tool_calls(text, id_prefix=f"call_{turn}")
        return ChatResponse(
            content=content,
            tool_calls=calls,
            prompt_token_ids=ids,
            completion_token_ids=completion,
            completion_logprobs=logprobs,
            finish_reason=("tool_calls" if calls else "stop") if ended else "length",
            usage=Usage(prompt_tokens=len(ids), completion_tokens=len(completion)),
            raw_text=text,
        )

    def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> tuple[
            list[int], list[float]]:
        """(completion ids, their logprobs) for a prompt: batched with other threads'
        turns, or alone through transformers' `generate` when built with max_batch=None."""
        if self.batcher is not None:
            return self.batcher.generate(prompt_ids, sampling)
        import torch

        device = next(self.model.parameters()).device
        greedy = sampling.temperature <= 0
        temperature = 1.0 if greedy else sampling.temperature
        kwargs: dict[str, Any] = {
            "max_new_tokens": sampling.max_new_tokens,
            "do_sample": not greedy,
            "eos_token_id": self.eos_ids,
            "pad_token_id": self.pad_id,
            "return_dict_in_generate": True,
            "output_logits": True,
        }
        if not greedy:
            kwargs.update(temperature=temperature, top_p=sampling.top_p, top_k=0)
        if sampling.max_time_sec is not None:
            kwargs["max_time"] = sampling.max_time_sec
        input_ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)
        with self._lock, torch.no_grad():
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
            out = self.model.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                                      **kwargs)
        new = out.sequences[0, len(prompt_ids):].tolist()
        completion: list[int] = []
        for tok in new:
            completion.append(int(tok))
            if tok in self.eos_ids:
                break
        logprobs = []
        for step, tok in enumerate(completion):
            logits = out.logits[step][0].float() / temperature
            logprobs.append(float(torch.log_softmax(logits, dim=-1)[tok]))
        return completion, logprobs


def hf_message(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-form message in the shape chat templates expect (arguments as dicts)."""
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        calls = []
        for call in message["tool_calls"]:
            fn = call.get("function", call)
            args = decode_arguments(fn.get("arguments"))
            calls.append({"id": call.get("id"), "type": "function",
                          "function": {"name": fn.get("name", ""),
                                       "arguments": args if args is not None
                                       else fn.get("arguments")}})
        out["tool_calls"] = calls
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out
