"""Measure the peak memory of one training step of an HF Qwen2 model built from a config, on CPU.

Runs on: the test machine (no GPU). Real tensors, bf16 autocast like FSDP's mixed precision, verl's own
`logprobs_from_logits` for the log-probs, AdamW, and PyTorch's MemTracker for the peak. Used by
scripts/calibrate_memory.py (which fits the estimator's coefficients) and by the calibration tests (which re-measure
one configuration themselves). Differences from a GPU: no allocator fragmentation, CPU attention kernels.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    batch: int
    seq: int
    checkpointing: bool

    def to_dict(self) -> dict:
        return asdict(self)


def measure_train_step(shape: Shape, steps: int = 2) -> dict[str, float]:
    """Peak bytes of the last of `steps` training steps (the optimizer state exists from the second on), by category."""
    from torch.distributed._tools.mem_tracker import MemTracker
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from verl.utils.torch_functional import logprobs_from_logits

    torch.manual_seed(0)
    config = Qwen2Config(
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        vocab_size=shape.vocab,
        max_position_embeddings=max(4096, shape.seq),
        tie_word_embeddings=False,
        use_cache=False,
    )
    config._attn_implementation = "sdpa"
    model = Qwen2ForCausalLM(config)
    if shape.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    input_ids = torch.randint(0, shape.vocab, (shape.batch, shape.seq))

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=input_ids).logits
        log_probs = logprobs_from_logits(logits[:, :-1].float(), input_ids[:, 1:])
        (-log_probs.mean()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(steps - 1):
        step()
    tracker = MemTracker()
    tracker.track_external(model, optimizer)
    with tracker:
        step()
    snapshot = tracker.get_tracker_snapshot("peak")
    device = next(key for key in snapshot if key.type == "cpu")
    peak = {str(kind).split(".")[-1].lower(): float(value) for kind, value in snapshot[device].items()}
    peak["params"] = float(sum(p.numel() for p in model.parameters()))
    return peak
