"""Generation batched across threads: concurrent requests share one KV-cache decode loop.

Trials run in threads and each asks the in-process model for one turn at a time. Run one
by one, a small model spends its time in per-call overhead while the machine idles; run
together, eight rows cost about what one does. `BatchedGenerator.generate` queues a
request and blocks; one worker thread gathers what is pending (up to `max_batch`, waiting
at most `gather_sec` for more), left-pads the prompts, prefills them in one forward pass
and decodes all rows step by step over a shared KV cache. A row leaves the batch (and its
caller gets its answer) as soon as it ends: end token, `max_new_tokens`, or
`max_time_sec` counted from when the request was made. When rows leave, the leading
columns that are padding in every row left are cut away, so the cache is only as wide as
the longest row still decoding.

What a request gets does not depend on the batch it ran in, to the last bit:

* each request's prompt is prefilled alone (one request per pass: exactly its pass
  alone), and every decode step computes each row as if alone (models/invariant.py:
  one-row products for the linear layers, attention over the row's own keys with sums
  in a fixed order), so a row's logits are bit-identical alone and beside any rows,
  wherever it sits and whatever joins or leaves; which rows share a batch depends on
  timing, and a result that depended on it would make a trial's verdict depend on when
  it ran;
* completion ids up to and including the end token, and the logprob of each under
  logits / temperature (plain logits when greedy), before top-p truncation: what
  `TransformersChatModel` records and GRPO's ratio needs;
* the sample is drawn from the row's own `torch.Generator` (seeded with
  `SamplingParams.seed`), by inverse CDF in float64 on the CPU over the top-p set sorted
  stably, so the same seed gives the same tokens alone and in any batch. Positions are
  counted from each row's first real token. (transformers' own `generate`, other
  kernels, agrees to ~1e-6 in the logprobs.)

The worker exits after `IDLE_SEC` without requests and is started again by the next
one, so an idle model holds no thread. Weights are read at each forward pass: a trainer may
update them between batches, never during one (GRPO generates and steps in turn).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from posttrain_arena.models.base import SamplingParams
from posttrain_arena.models.invariant import row_invariant, supports

DEFAULT_MAX_BATCH = 16
DEFAULT_GATHER_SEC = 0.01
IDLE_SEC = 2.0  # how long the worker waits for a request before it exits


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


@dataclass
class BatchStats:
    """How full the forward passes were (prefills and decode steps alike)."""

    passes: int = 0
    rows: int = 0
    widest: int = 0
    cells: int = 0  # rows x columns of the attention masks (the cache the passes read)
    padding: int = 0  # of those, cells that were left padding

    @property
    def mean_rows(self) -> float:
        return self.rows / self.passes if self.passes else 0.0


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
        self.stats = BatchStats()
        # Rows computed as if alone (models/invariant.py): what a request gets cannot
        # depend on which requests happened to share its batch.
        self.invariant = supports(model)
        self._cond = threading.Condition()
        self._pending: list[_Request] = []
        self._worker: threading.Thread | None = None

    @property
    def waiting(self) -> int:
        """Requests queued and not yet admitted to a batch."""
        with self._cond:
            return len(self._pending)

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
                # Linger a little: trials come back within moments, and a thread that
                # kept the model's math thread pool warm is faster than a new one.
                if not self._cond.wait_for(lambda: bool(self._pending), IDLE_SEC):
                    self._worker = None
                    return
                # Wait a moment for other threads' requests; stop as soon as the batch is full.
                until = time.monotonic() + self.gather_sec
                while len(self._pending) < self.max_batch:
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            taken: list[_Request] = []
            try:
                self._decode(taken)
            except BaseException as exc:  # every waiting caller must wake up with it
                for request in taken:
                    if not request.done.is_set():
                        request.error = exc
                        request.done.set()
                if not isinstance(exc, Exception):
                    raise

    def _take(self, room: int) -> list[_Request]:
        with self._cond:
            taken = self._pending[:room]
            del self._pending[:room]
        return taken

    def _decode(self, taken: list[_Request]) -> None:
        """Decode until no row is left, admitting pending requests between steps while
        there is room (`taken` lists every request admitted, for the error path)."""
        import torch

        rows: _Rows | None = None
        with torch.no_grad():
            while True:
                if rows is None:
                    room = self.max_batch
                else:  # a cache that cannot be merged (see can_join) runs alone
                    room = self.max_batch - len(rows.requests) if rows.can_join else 0
                joining = self._take(room) if room else []
                # Row-invariant: each request's prompt is prefilled alone (the same pass it
                # gets alone, plain kernels), then its cache joins the batch's.
                groups = [[r] for r in joining] if self.invariant else (
                    [joining] if joining else [])
                for group in groups:
                    try:
                        new = _Rows(self, group)
                    except Exception as exc:  # a bad prompt fails its own group only
                        for request in group:
                            request.error = exc
                            request.done.set()
                    else:
                        taken += group
                        if rows is None:
                            rows = new
                        else:
                            rows.absorb(new)
                if rows is None:
                    return
                self._choose(rows.requests, rows.logits)
                now = time.monotonic()
                keep = []
                for row, request in enumerate(rows.requests):
                    if self._finished(request, now):
                        request.done.set()
                    else:
                        keep.append(row)
                if not keep:
                    rows = None
                    continue
                rows.select(keep)
                rows.advance()

    def _forward(self, ids: Any, mask: Any, positions: Any, cache: Any,
                 decode: bool = False) -> Any:
        """One forward pass; the cache is read and extended in place. By keyword, so that
        wrappers (PEFT) pass it on. A decode step of an invariant batcher computes each
        row as if alone (models/invariant.py); a prefill is of one request already."""
        self.stats.passes += 1
        self.stats.rows += ids.shape[0]
        self.stats.widest = max(self.stats.widest, ids.shape[0])
        self.stats.cells += mask.numel()
        self.stats.padding += mask.numel() - int(mask.sum())
        alone = row_invariant(self.model) if decode and self.invariant else (
            contextlib.nullcontext())
        with alone:
            return self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                              use_cache=True, logits_to_keep=1, **{_cache_keyword(): cache})

    def _choose(self, requests: list[_Request], logits: Any) -> None:
        """Pick every row's next token; record it and its logprob. Every operation here
        works row by row, so a row's choice does not depend on the rows beside it."""
        import torch

        device = logits.device
        temps = torch.tensor([r.sampling.temperature if r.sampling.temperature > 0 else 1.0
                              for r in requests], device=device)
        scaled = logits.float() / temps[:, None]
        logp = torch.log_softmax(scaled, dim=-1)
        tokens = scaled.argmax(dim=-1)  # the greedy rows' choice (plain logits)
        sampled = [row for row, r in enumerate(requests) if r.sampling.temperature > 0]
        if sampled:
            index = torch.tensor(sampled, device=device)
            probs, order = torch.sort(logp[index].exp(), dim=-1, descending=True, stable=True)
            # Top-p: the smallest head of the ranking whose mass reaches top_p (at least
            # one token); top_p = 1 keeps every token, whatever the rounding of the sums.
            top_p = torch.tensor([requests[row].sampling.top_p
                                  if requests[row].sampling.top_p < 1 else float("inf")
                                  for row in sampled], device=device)
            outside = (torch.cumsum(probs, dim=-1) - probs) >= top_p[:, None]
            outside[:, 0] = False
            cdf = torch.cumsum(probs.masked_fill(outside, 0.0).to("cpu", torch.float64), dim=-1)
            u = torch.cat([torch.rand(1, generator=requests[row].generator, dtype=torch.float64)
                           for row in sampled])
            picks = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True)
            picks = picks.clamp(max=cdf.shape[1] - 1).to(device)
            tokens[index] = order.gather(-1, picks).squeeze(-1)
        chosen = logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        for request, token, lp in zip(requests, tokens.tolist(), chosen.tolist(), strict=True):
            request.ids.append(int(token))
            request.logprobs.append(float(lp))

    def _finished(self, request: _Request, now: float) -> bool:
        return (request.ids[-1] in self.eos_ids
                or len(request.ids) >= request.sampling.max_new_tokens
                or (request.deadline is not None and now >= request.deadline))


@functools.cache
def _cache_keyword() -> str:
    """The keyword under which this transformers version's own generate hands a model its
    KV cache: past_key_values, renamed cache in 5.x (the old name is deprecated there)."""
    from transformers import GenerationMixin

    params = inspect.signature(GenerationMixin.prepare_inputs_for_generation).parameters
    return "cache" if "cache" in params else "past_key_values"


class _Rows:
    """Rows decoding together: their requests, one KV cache (left-padded to a common
    length), the attention mask over it, each row's last position and next-token logits."""

    def __init__(self, owner: BatchedGenerator, requests: list[_Request]) -> None:
        import torch
        from transformers import DynamicCache

        for request in requests:
            gen = torch.Generator(device="cpu")
            if request.sampling.seed is not None:
                gen.manual_seed(request.sampling.seed)
            else:
                gen.seed()
            request.generator = gen
        self.owner = owner
        self.requests = requests
        device = next(owner.model.parameters()).device
        width = max(len(r.prompt) for r in requests)
        ids = torch.full((len(requests), width), owner.pad_id, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for row, request in enumerate(requests):
            ids[row, width - len(request.prompt):] = torch.tensor(request.prompt)
            mask[row, width - len(request.prompt):] = 1
        self.mask = mask.to(device)
        # Positions count from each row's first real token, as if it were alone.
        positions = (self.mask.cumsum(-1) - 1).clamp(min=0)
        self.cache: Any = DynamicCache()
        self.logits = owner._forward(ids.to(device), self.mask, positions,
                                     self.cache).logits[:, -1]
        self.last = positions[:, -1:]

    @property
    def can_join(self) -> bool:
        """Whether other rows can be merged in: only plain growing layers (not sliding
        windows, not linear-attention states) are merged by concatenation."""
        from transformers.cache_utils import DynamicLayer

        return all(type(layer) is DynamicLayer for layer in self.cache.layers)

    def select(self, keep: list[int]) -> None:
        """Keep only these rows."""
        import torch

        if len(keep) == len(self.requests):
            return
        index = torch.tensor(keep, device=self.mask.device)
        self.cache.batch_select_indices(index)
        self.mask, self.last = self.mask[index], self.last[index]
        self.requests = [self.requests[row] for row in keep]
        self.trim()

    def trim(self) -> None:
        """Drop the leading columns that are padding in every row left. Without this a
        batch that rows keep joining and leaving only widens: its cache grew to the
        longest conversation ever admitted (over 1,000 columns, four in five padding, in
        the micro evaluation) and every step attended over, and copied, all of it."""
        if not self.can_join:  # only plain growing layers are cut like this
            return
        first = int(self.mask.any(dim=0).int().argmax())
        if first == 0:
            return
        for layer in self.cache.layers:
            layer.keys = layer.keys[:, :, first:]
            layer.values = layer.values[:, :, first:]
        self.mask = self.mask[:, first:]

    def advance(self) -> None:
        """Feed every row's latest token; the logits become those of the next one."""
        import torch

        step = torch.tensor([[r.ids[-1]] for r in self.requests], dtype=torch.long,
                            device=self.mask.device)
        self.mask = torch.cat([self.mask, torch.ones_like(step)], dim=-1)
        self.last = self.last + 1
        self.logits = self.owner._forward(step, self.mask, self.last, self.cache,
                                          decode=True).logits[:, -1]

    def absorb(self, other: _Rows) -> None:
        """Append another group's rows (both waiting for their next token): caches and
        masks are left-padded to the longer length, padding masked out."""
        import torch
        from torch.nn.functional import pad

        width = max(self.mask.shape[1], other.mask.shape[1])

        def widen(t: Any, length: int) -> Any:  # left-pad dim -2 (cache) or -1 (mask)
            return pad(t, (0, 0, width - length, 0) if t.dim() == 4 else (width - length, 0))

        for mine, theirs in zip(self.cache.layers, other.cache.layers, strict=True):
            mine.keys = torch.cat([widen(mine.keys, self.mask.shape[1]),
                                   widen(theirs.keys, other.mask.shape[1])])
            mine.values = torch.cat([widen(mine.values, self.mask.shape[1]),
                                     widen(theirs.values, other.mask.shape[1])])
        self.mask = torch.cat([widen(self.mask, self.mask.shape[1]),
                               widen(other.mask, other.mask.shape[1])])
        self.last = torch.cat([self.last, other.last])
        self.logits = torch.cat([self.logits, other.logits])
        self.requests = self.requests + other.requests
