"""Loading, adapting and saving the policy for the training stages (torch, PEFT).

Kept apart from the stages so that `plan` and `validate` never import torch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from posttrain_arena.train.recipe import LoraSpec, ModelSection


def pick_device(preference: str) -> str:
    """'cuda' when asked for (or 'auto' and available), else 'cpu'."""
    import torch

    if preference == "cpu":
        return "cpu"
    if preference == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("[runtime] device = 'cuda' but no CUDA device is visible; use 'auto'")
    return "cuda" if torch.cuda.is_available() else "cpu"


@contextmanager
def cpu_threads(n: int) -> Iterator[None]:
    """torch's intra-op CPU threads set to `n` inside the block, restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def torch_dtype(name: str, device: str) -> Any:
    import torch

    if name == "auto":
        return torch.bfloat16 if device == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def load_tokenizer(location: str, revision: str | None = None) -> Any:
    """The tokenizer, with a pad token (the EOS token when the model has none)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(location, revision=revision)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_causal_lm(location: str, section: ModelSection, device: str,
                   revision: str | None = None) -> Any:
    """A causal LM for training, on `device`."""
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(
        location,
        revision=revision,
        dtype=torch_dtype(section.dtype, device),
        trust_remote_code=section.trust_remote_code,
    )
    return model.to(device)


def lora_config(spec: LoraSpec) -> Any:
    """PEFT LoraConfig from the recipe's adapter shape."""
    from peft import LoraConfig

    targets: Any = spec.target_modules
    if targets == ["all-linear"]:
        targets = "all-linear"
    return LoraConfig(
        r=spec.r,
        lora_alpha=spec.alpha,
        lora_dropout=spec.dropout,
        target_modules=targets,
        modules_to_save=spec.modules_to_save or None,
        task_type="CAUSAL_LM",
    )


def trainer_settings(*, seed: int, device: str, section: ModelSection,
                     save_steps: int) -> dict[str, Any]:
    """The TrainingArguments every trainer here shares (SFT's and GRPO's): one log line
    and a checkpoint every `save_steps` (the last one kept), no reporting service, seeded
    sampling and data order, the device's precision, no progress bars or loader workers;
    activation checkpointing only on GPUs (TRL turns it on by default, which on the CPU
    recomputes every forward for nothing)."""
    return {
        "logging_steps": 1, "save_strategy": "steps", "save_steps": save_steps,
        "save_total_limit": 1, "report_to": [], "seed": seed, "data_seed": seed,
        "use_cpu": device == "cpu",
        "bf16": device == "cuda" and section.dtype in ("auto", "bfloat16"),
        "disable_tqdm": True, "dataloader_num_workers": 0,
        "gradient_checkpointing": device == "cuda",
    }


def trainable_snapshot(model: Any) -> dict[str, Any]:
    """A CPU copy of every trainable parameter (to measure how far training moved it)."""
    return {
        name: p.detach().to("cpu", copy=True).float()
        for name, p in model.named_parameters()
        if p.requires_grad
    }


def delta_norm(before: dict[str, Any], model: Any) -> dict[str, float]:
    """L2 norm of (after - before) over the snapshot's parameters, and their norm after."""
    import torch

    params = dict(model.named_parameters())
    sq_delta = 0.0
    sq_after = 0.0
    changed = 0
    for name, old in before.items():
        new = params[name].detach().to("cpu").float()
        d = float(torch.sum((new - old) ** 2))
        sq_delta += d
        sq_after += float(torch.sum(new**2))
        changed += int(d > 0)
    return {
        "param_delta_norm": sq_delta**0.5,
        "param_norm_after": sq_after**0.5,
        "params_tracked": len(before),
        "params_changed": changed,
    }


def save_policy(model: Any, tokenizer: Any, out_dir: Path, *, adapter_dir: Path | None) -> None:
    """Save the trained policy as a plain model folder (LoRA merged in), plus the adapter."""
    out_dir.mkdir(parents=True, exist_ok=True)
    merged = model
    if hasattr(model, "merge_and_unload"):
        if adapter_dir is not None:
            model.save_pretrained(str(adapter_dir))
        merged = model.merge_and_unload()
    merged.save_pretrained(str(out_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(out_dir))


def latest_checkpoint(folder: Path, containing: str | None = None) -> Path | None:
    """The newest `checkpoint-N` folder a Trainer left under `folder`; with `containing`,
    the newest that holds that file (what a caller saved beside the Trainer's state)."""
    if not folder.is_dir():
        return None
    found = [p for p in folder.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()
             and (containing is None or (p / containing).is_file())]
    return max(found, key=lambda p: int(p.name.split("-")[-1])) if found else None
