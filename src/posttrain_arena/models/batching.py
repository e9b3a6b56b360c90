"""Generation batched across threads: concurrent requests share one KV-cache decode loop.

Trials run in threads and each asks the in-process model for one turn at a time. Run one
by one, a small model spends its time in per-call overhead while the machine idles; run
together, eight rows cost about what one does. `BatchedGenerator.generate` queues a
request and blocks; one worker thread gathers what is pending (up to `max_batch`, waiting
at most `gather_sec` for more), left-pads the prompts, prefills them in one forward pass
and decodes all rows step by step over a shared KV cache. A row leaves the batch (and its
caller gets its answer) as soon as it ends: end token, `max_new_tokens`, or
`max_time_sec` counted from when the request was made.

What a request gets does not depend on the batch it ran in:

* completion ids up to and including the end token, and the logprob of each under
  logits / temperature (plain logits when greedy), before top-p truncation: what
  `TransformersChatModel` records and GRPO's ratio needs;
* the sample is drawn from the row's own `torch.Generator` (seeded with
  `SamplingParams.seed`), by inverse CDF in float64 on the CPU over the top-p set sorted
  stably, so the same seed gives the same tokens alone, in any batch and on any device
  whose logits agree. Positions are counted from each row's first real token, so left
  padding changes nothing but the floating-point order of sums (logprobs agree to ~1e-6;
  a token could only change where two choices are tied to that precision).

The worker exits when the queue is empty and is started again by the next request, so
an idle model holds no thread. Weights are read at each forward pass: a trainer may
update them between batches, never during one (GRPO generates and steps in turn).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from posttrain_arena.models.base import SamplingParams

DEFAULT_MAX_BATCH = 16
DEFAULT_GATHER_SEC = 0.01


@dataclass
class _Request:
    """One pending generation and, once done, its answer."""

    prompt: list[int]
    sampling: SamplingParams
    deadline: float | None
    done: threading.Event = field(default_factory=threading.Event)
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    error: BaseException | None = None
    generator: Any = None


class BatchedGenerator:
    """Batches `generate` calls of many threads onto one causal LM."""

    def __init__(self, model: Any, *, eos_ids: Sequence[int], pad_id: int,
                 max_batch: int = DEFAULT_MAX_BATCH,
                 gather_sec: float = DEFAULT_GATHER_SEC) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1 (got {max_batch})")
        if gather_sec < 0:
            raise ValueError(f"gather_sec must be >= 0 (got {gather_sec})")
        self.model = model
        self.eos_ids = frozenset(int(e) for e in eos_ids)
        self.pad_id = int(pad_id)
        self.max_batch = max_batch
        self.gather_sec = gather_sec
        self.batch_sizes: list[int] = []  # rows of each batch run (for benchmarks)
        self._cond = threading.Condition()
        self._pending: list[_Request] = []
        self._worker: threading.Thread | None = None

    def generate(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> tuple[
            list[int], list[float]]:
        """(completion ids, their logprobs) for a prompt; blocks until its row ends."""
        if not prompt_ids:
            raise ValueError("generate needs a non-empty prompt")
        deadline = (time.monotonic() + sampling.max_time_sec
                    if sampling.max_time_sec is not None else None)
        request = _Request(list(prompt_ids), sampling, deadline)
        with self._cond:
            self._pending.append(request)
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="batched-generate",
                                                daemon=True)
                self._worker.start()
            self._cond.notify_all()
        request.done.wait()
        if request.error is not None:
            raise request.error
        return request.ids, request.logprobs

    # -- the worker ------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self._cond:
                if not self._pending:
                    self._worker = None
                    return
                # Wait a moment for other threads' requests; stop as soon as the batch is full.
                until = time.monotonic() + self.gather_sec
                while len(self._pending) < self.max_batch:
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
            self.batch_sizes.append(len(batch))
            try:
                self._decode(batch)
            except BaseException as exc:  # every waiting caller must wake up with it
                for request in batch:
                    if not request.done.is_set():
                        request.error = exc
                        request.done.set()
                if not isinstance(exc, Exception):
                    raise

    def _decode(self, batch: list[_Request]) -> None:
        import torch
        from transformers import DynamicCache

        for request in batch:
            gen = torch.Generator(device="cpu")
            if request.sampling.seed is not None:
                gen.manual_seed(request.sampling.seed)
            else:
                gen.seed()
            request.generator = gen
        device = next(self.model.parameters()).device
        width = max(len(r.prompt) for r in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, request in enumerate(batch):
            ids[row, width - len(request.prompt):] = torch.tensor(request.prompt)
            mask[row, width - len(request.prompt):] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        live = list(batch)
        cache = DynamicCache()
        with torch.no_grad():
            out = self._forward(ids, mask, positions, cache)
            while True:
                tokens = [self._choose(r, out.logits[row, -1]) for row, r in enumerate(live)]
                now = time.monotonic()
                keep = [row for row, r in enumerate(live) if not self._finished(r, now)]
                for row, request in enumerate(live):
                    if row not in keep:
                        request.done.set()
                if not keep:
                    return
                if len(keep) < len(live):
                    index = torch.tensor(keep, device=device)
                    cache.batch_select_indices(index)
                    mask, positions = mask[index], positions[index]
                    live = [live[row] for row in keep]
                    tokens = [tokens[row] for row in keep]
                step = torch.tensor(tokens, dtype=torch.long, device=device).unsqueeze(-1)
                mask = torch.cat([mask, torch.ones_like(step)], dim=-1)
                positions = positions[:, -1:] + 1
                out = self._forward(step, mask, positions, cache)

    def _forward(self, ids: Any, mask: Any, positions: Any, cache: Any) -> Any:
        # The cache is the fourth parameter of causal LMs' forward, named past_key_values
        # before transformers 5.x and cache since: passed by position, it is read and
        # extended in place under either name.
        return self.model(ids, mask, positions, cache, use_cache=True, logits_to_keep=1)

    def _choose(self, request: _Request, logits: Any) -> int:
        """Pick the row's next token, record it and its logprob; returns the token."""
        import torch

        sampling = request.sampling
        greedy = sampling.temperature <= 0
        scaled = logits.float() / (1.0 if greedy else sampling.temperature)
        logp = torch.log_softmax(scaled, dim=-1)
        if greedy:
            token = int(torch.argmax(scaled))
        else:
            probs, order = torch.sort(logp.exp(), descending=True, stable=True)
            if sampling.top_p < 1.0:
                # The smallest head of the ranking whose mass reaches top_p (at least one).
                before = torch.cumsum(probs, dim=-1) - probs
                n = max(1, int((before < sampling.top_p).sum()))
                probs, order = probs[:n], order[:n]
            cdf = torch.cumsum(probs.to("cpu", torch.float64), dim=-1)
            u = torch.rand(1, generator=request.generator, dtype=torch.float64) * cdf[-1]
            pick = min(int(torch.searchsorted(cdf, u, right=True)), len(cdf) - 1)
            token = int(order[pick])
        request.ids.append(token)
        request.logprobs.append(float(logp[token]))
        return token

    def _finished(self, request: _Request, now: float) -> bool:
        return (request.ids[-1] in self.eos_ids
                or len(request.ids) >= request.sampling.max_new_tokens
                or (request.deadline is not None and now >= request.deadline))
