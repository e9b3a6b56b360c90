"""No optimizer step without signal: a GRPO batch whose groups are all flat (no reward
variance, or nothing scorable) leaves weights, optimizer state and LR schedule as they
were, instead of stepping on a zero gradient (which still advances Adam's moments and
step counts and the schedule)."""

from __future__ import annotations

import types
from typing import Any, Protocol


class _Stats(Protocol):
    flat_batches_skipped: int


class FlatFlag(Protocol):
    """What the rollout tells the trainer: whether its latest batch was all flat."""

    last_batch_flat: bool

    @property
    def stats(self) -> _Stats:
        """Counters; `flat_batches_skipped` counts the skipped steps."""


def skip_flat_steps(optimizer: Any, rollout: FlatFlag) -> None:
    """Make `optimizer.step` a no-op after a batch whose groups were all flat
    (`rollout.last_batch_flat`): nothing to learn, so nothing moves (weights, Adam
    moments and step counts). Call before the LR scheduler wraps the optimizer.

    One generation feeds one optimizer step here (the generation batch is one step's
    worth of gradient accumulation), so the latest batch is the step's batch."""
    optimizer_step = optimizer.step

    def step(_self: Any, *args: Any, **kwargs: Any) -> Any:
        if rollout.last_batch_flat:
            rollout.stats.flat_batches_skipped += 1
            return None
        return optimizer_step(*args, **kwargs)

    # A bound method, as torch's LR scheduler expects to wrap one.
    optimizer.step = types.MethodType(step, optimizer)


class HoldOnFlat:
    """An LR scheduler that does not advance after a flat batch (its step was skipped);
    everything else (state_dict, get_last_lr, ...) is the wrapped scheduler's."""

    def __init__(self, scheduler: Any, rollout: FlatFlag) -> None:
        self.scheduler = scheduler
        self.rollout = rollout

    def step(self, *args: Any, **kwargs: Any) -> Any:
        """Advance the schedule, unless the optimizer step was skipped."""
        return None if self.rollout.last_batch_flat else self.scheduler.step(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scheduler, name)
