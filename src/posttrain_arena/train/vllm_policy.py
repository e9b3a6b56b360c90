"""The GRPO policy sampled on TRL's vLLM server instead of in this process."""

from __future__ import annotations

from typing import Any

from posttrain_arena.models.base import SamplingParams
from posttrain_arena.models.transformers_local import TransformersChatModel


class VllmPolicy(TransformersChatModel):
    """The local chat client's rendering, with tokens sampled by TRL's vLLM server (kept in
    sync with the policy's weights): token ids in, token ids and logprobs out, no lock."""

    def __init__(self, model: Any, tokenizer: Any, client: Any) -> None:
        super().__init__(model, tokenizer, name="policy-vllm")
        self.client = client

    def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> tuple[
            list[int], list[float]]:
        """Sample on the server; the sampled token's logprob per position."""
        extra = {"seed": sampling.seed} if sampling.seed is not None else None
        out = self.client.generate([prompt_ids], temperature=sampling.temperature,
                                   top_p=sampling.top_p, max_tokens=sampling.max_new_tokens,
                                   logprobs=0, generation_kwargs=extra)
        ids = [int(t) for t in out["completion_ids"][0]]
        lps = [float(lp[0]) if lp else 0.0 for lp in out["logprobs"][0]]
        return ids, lps
