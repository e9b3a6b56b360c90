"""Forward passes whose every row is computed as if it were alone: batch invariance.

A batched decode step is faster than one pass per row, but the usual kernels make a
row's numbers depend on the rows beside it: a matrix product picks its kernel (and the
order of its sums) by the number of rows and a row's place among them, and attention
over a left-padded cache sums over columns that are not the row's own. Both move a
logprob in its seventh digit, and which rows share a batch depends on timing, so a
sampled token, and with it a trial's verdict, could depend on when it ran.

Inside `row_invariant(model)`:

* every `torch.nn.Linear` (LoRA's too) is computed as a batch of one-row products
  (`baddbmm` over rows, each of shape 1 x in): the kernel, and the order of every sum,
  are those of a row alone, whatever the number of rows or the row's place;
* attention is computed row by row over that row's own keys only (the columns its mask
  lets the last query see), with an explicit causal mask of the same shape a row alone
  gets, so padding and neighbours never enter a sum.

Everything else a decoder does per row (embeddings, norms, rotary positions, the
activation) reads only the row itself. So a row's logits are bit-identical alone and in
any batch on the same machine and thread count. The cost is a loop over rows in each
attention layer; the micro model's decode steps are as fast (the one-row products are
no slower than the padded matrix kernel at its widths), its prefill somewhat slower.

Models whose attention does not go through transformers' attention interface
(`config._attn_implementation`) cannot be made invariant this way: `supports` says so.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import Any

NAME = "arena_row_invariant"
_registered = threading.Lock()
_done: list[bool] = []


def supports(model: Any) -> bool:
    """Whether `model` dispatches attention by name (transformers' attention interface)
    and its linear layers run their class's own forward (accelerate's offloading hooks,
    for one, replace it per instance: such a model is left as it is)."""
    import torch

    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "_attn_implementation"):
        return False
    return all("forward" not in vars(m) for m in model.modules()
               if isinstance(m, torch.nn.Linear))


@contextlib.contextmanager
def row_invariant(model: Any) -> Iterator[None]:
    """Run the model's forward passes batch-invariantly (module docstring) in this block.

    The model's attention implementation and its linear layers' forward are switched for
    the block and restored after; nothing else may run the same model meanwhile (the
    batcher holds the block while it decodes, and a trainer steps only between)."""
    import torch

    _register()
    config = model.config
    before = config._attn_implementation
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    config._attn_implementation = NAME
    for layer in linears:  # an instance attribute shadows the class's forward
        layer.forward = functools.partial(_linear_module, layer)  # type: ignore[method-assign]
    try:
        with torch.no_grad():
            yield
    finally:
        config._attn_implementation = before
        for layer in linears:
            del layer.forward


def _register() -> None:
    with _registered:
        if _done:
            return
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(NAME, rowwise_attention)
        AttentionMaskInterface.register(NAME, sdpa_mask)
        _done.append(True)


def _linear_module(layer: Any, x: Any) -> Any:
    return linear_rows(x, layer.weight, layer.bias)


def linear_rows(x: Any, weight: Any, bias: Any = None) -> Any:
    """x @ weight.T + bias as one one-row product per row (see the module docstring)."""
    import torch

    rows = x.reshape(-1, 1, x.shape[-1])
    w = weight.t().unsqueeze(0).expand(rows.shape[0], *weight.t().shape)
    if bias is None:
        out = torch.bmm(rows, w)
    else:
        out = torch.baddbmm(bias.expand(rows.shape[0], 1, weight.shape[0]), rows, w)
    return out.reshape(*x.shape[:-1], weight.shape[0])


def rowwise_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                      dropout: float = 0.0, scaling: float | None = None,
                      sliding_window: int | None = None, **kwargs: Any) -> tuple[Any, None]:
    """transformers attention function: each row attends over its own keys only.

    query (B, H, Tq, d); key and value (B, Hkv, S, d); attention_mask a boolean
    (B, 1, Tq, S) mask (True: attend) or None (no padding: all keys, causal). Rows are
    left-padded (the batcher's layout): a row's own keys are its last n columns and its
    queries its last m. Returns (B, Tq, H, d), zeros at query positions of padding."""
    import torch
    from torch.nn.functional import scaled_dot_product_attention

    batch, heads, tq, dim = query.shape
    s = key.shape[2]
    if attention_mask is None:
        own_keys, own_queries = [s] * batch, [tq] * batch
    else:
        if attention_mask.dtype != torch.bool:
            attention_mask = attention_mask == 0  # additive float mask: 0 where attended
        mask = attention_mask[:, 0]
        own_keys = mask[:, -1].sum(-1).tolist()
        own_queries = mask.any(-1).sum(-1).tolist()
    groups = heads // key.shape[1]
    if tq == 1:
        return _decode_attention(query, key, value, own_keys, groups, scaling), None
    out = query.new_zeros(batch, tq, heads, dim)
    for row, (n, m) in enumerate(zip(own_keys, own_queries, strict=True)):
        if m == 0:
            continue
        q = query[row:row + 1, :, tq - m:].contiguous()
        k, v = key[row:row + 1, :, s - n:], value[row:row + 1, :, s - n:]
        if groups > 1:  # grouped-query attention: each key head serves `groups` heads
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        k, v = k.contiguous(), v.contiguous()
        result = scaled_dot_product_attention(q, k, v, attn_mask=_causal(m, n, sliding_window,
                                                                          query.device),
                                              dropout_p=dropout, scale=scaling)
        out[row, tq - m:] = result[0].transpose(0, 1)
    return out, None


def _decode_attention(query: Any, key: Any, value: Any, own_keys: list[int], groups: int,
                      scaling: float | None) -> Any:
    """One query per row, every row at once, with no sum whose order padding could move.

    Every sum is a sequential scan (`cumsum`, whose last element adds its terms in
    order), and the maximum is exact in any order. Scores sum over the head dimension
    alone. A row's padding comes before its own keys (left padding) and adds exact zeros
    at the start of each scan over keys (0 + x is x), so each row's result is the one it
    gets alone, however wide the batch's cache."""
    import torch

    dim, s = query.shape[-1], key.shape[2]
    scale = scaling if scaling is not None else dim ** -0.5
    if groups > 1:  # grouped-query attention: each key head serves `groups` heads
        key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    scores = torch.cumsum(query * key, dim=-1)[..., -1] * scale  # (B, H, S)
    padding = torch.arange(s, device=query.device)[None, :] < (s - torch.tensor(
        own_keys, device=query.device))[:, None]  # (B, S): the columns before a row's keys
    scores = scores.masked_fill(padding[:, None, :], float("-inf"))
    weights = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    total = torch.cumsum(weights, dim=-1)[..., -1:]  # (B, H, 1)
    mixed = torch.cumsum(weights.unsqueeze(-1) * value, dim=2)[:, :, -1]  # (B, H, d)
    return (mixed / total).unsqueeze(1)  # (B, 1, H, d)


def _causal(m: int, n: int, window: int | None, device: Any) -> Any:
    """The mask of a row's last m queries over its n keys: each sees itself and the
    tokens before (within the sliding window, if any). The same (m, n) gives the same
    mask, alone or in a batch; None when every key is seen (one query, no window)."""
    import torch

    if m == 1 and (window is None or window >= n):
        return None
    at = torch.arange(n - m, n, device=device)[:, None]
    seen = torch.arange(n, device=device)[None, :]
    allowed = seen <= at
    if window is not None:
        allowed &= seen > at - window
    return allowed
