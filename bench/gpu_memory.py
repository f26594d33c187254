"""GPU calibration kit of the memory preflight: measure each phase's peak and print it against launch/memory.py.

Runs on: a bare CUDA machine (torch and transformers only: no verl, no vLLM, no flash-attn needed, no download), or
on CPU at tiny sizes (`--cpu`, what tests/test_gpu_memory_kit.py runs so the arithmetic keeps working).

    python bench/gpu_memory.py --json gpu.json        # on the GPU node; ~2 minutes on an H100
    python bench/gpu_memory.py --cpu --tiny            # the same arithmetic on CPU

What it measures, each phase alone, as the bytes torch allocates above what existed before it started (the model
states are exact arithmetic in the estimator, 16 B/param sharded; what needs measuring is what a step adds):
- logits: hidden states -> lm_head -> per-token log-probs (+ backward), per token x vocab, for verl's three paths:
  `torch` (bf16 logits, row-wise log_softmax + gather: verl's logprobs_from_logits_v2), `flash` (flash-attn's Triton
  cross-entropy with in-place backward, when importable) and `fused` (512-token chunks recomputed in backward, logits
  upcast to fp32 per chunk, the memory shape of verl's FusedLinearForPPO);
- the entropy beside the log-probs (entropy_coeff != 0), eager and, on CUDA, through torch.compile as verl runs it
  by default;
- decoder layers: a training step of an HF Qwen2 model built from a config (random weights, bf16 like FSDP's
  compute copy, each gradient dropped once accumulated, as FSDP's reduce-scatter does) with and without gradient
  checkpointing, at a small vocabulary so the layers dominate; per token x hidden x layer;
- the log-prob pass: the same model's forward without grad;
- margins: the allocator's reserved/allocated ratio (fragmentation) and what the process holds outside torch's
  allocator (CUDA context, cuBLAS workspaces).
Then whole models at real Qwen2.5 shapes, predicted with the fitted coefficients (held out from the fit).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import gc
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from launch import memory  # noqa: E402  (pure arithmetic: imports nothing beyond the standard library)

FUSED_CHUNK = memory.FUSED_CHUNK_TOKENS


@dataclass(frozen=True)
class Shape:
    """A Qwen2 decoder; `seq` tokens per sequence, `batch` sequences per micro-batch."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    batch: int
    seq: int

    @property
    def tokens(self) -> int:
        return self.batch * self.seq

    def architecture(self) -> memory.Architecture:
        return memory.Architecture(
            self.layers,
            self.hidden,
            self.heads,
            self.kv_heads,
            self.hidden // self.heads,
            self.intermediate,
            self.vocab,
            False,
        )


class Meter:
    """Peak bytes allocated above the level at entry: CUDA's allocator statistics, or on CPU PyTorch's MemTracker
    (which counts the tensors created inside its context)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    @contextlib.contextmanager
    def measure(self, result: dict[str, float]) -> Iterator[None]:
        gc.collect()  # the previous case's model and tensors, before the baseline is read
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            yield
            torch.cuda.synchronize()
            result["peak"] = float(torch.cuda.max_memory_allocated() - base)
            result["reserved_over_allocated"] = torch.cuda.max_memory_reserved() / max(
                torch.cuda.max_memory_allocated(), 1
            )
            return
        from torch.distributed._tools.mem_tracker import MemTracker

        tracker = MemTracker()
        with tracker:
            yield
        snapshot = tracker.get_tracker_snapshot("peak")
        result["peak"] = float(max(stats.get("Total", 0) for stats in snapshot.values()) if snapshot else 0)


# --- log-probs from logits: verl's three paths ----------------------------------------------------------------------


def logprobs_torch(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """verl's pure-torch path on bf16 logits: a log_softmax per row, so no fp32 copy of the whole tensor."""
    rows = [
        F.log_softmax(row, dim=-1).gather(-1, label.unsqueeze(-1)).squeeze(-1)
        for row, label in zip(logits, labels, strict=True)
    ]
    return torch.stack(rows)


def flash_cross_entropy() -> Callable[..., Any] | None:
    try:
        from flash_attn.ops.triton.cross_entropy import cross_entropy_loss
    except Exception:  # not installed, or its CUDA extension does not load: the path verl would not take either
        return None
    return cross_entropy_loss


def logprobs_flash(logits: torch.Tensor, labels: torch.Tensor, inplace_backward: bool = True) -> torch.Tensor:
    """verl turns the in-place backward off when the entropy needs the logits too."""
    cross_entropy_loss = flash_cross_entropy()
    assert cross_entropy_loss is not None
    return -cross_entropy_loss(logits, labels, inplace_backward=inplace_backward)[0]


def chunk_logprobs(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    logits = F.linear(hidden, weight).float()
    return logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def logprobs_fused(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Chunks of FUSED_CHUNK tokens, each recomputed in backward: only one chunk's logits exist at a time."""
    parts = []
    for start in range(0, hidden.shape[0], FUSED_CHUNK):
        end = start + FUSED_CHUNK
        if torch.is_grad_enabled():
            part = torch.utils.checkpoint.checkpoint(
                chunk_logprobs, hidden[start:end], weight, labels[start:end], use_reentrant=False
            )
        else:
            part = chunk_logprobs(hidden[start:end], weight, labels[start:end])
        parts.append(part)
    return torch.cat(parts)


def head_bytes(
    meter: Meter, tokens: int, hidden: int, vocab: int, backward: bool, objective: Callable[..., torch.Tensor]
) -> tuple[float, dict[str, float]]:
    """One output-head computation on random bf16 hidden states and lm_head: its peak bytes above them, with the
    final grads of both (the model's, counted elsewhere) taken out. Intermediates go out of scope before backward,
    as in verl's forward step."""
    device = meter.device
    torch.manual_seed(0)
    states = torch.randn(tokens, hidden, dtype=torch.bfloat16, device=device, requires_grad=backward)
    weight = (torch.randn(vocab, hidden, dtype=torch.bfloat16, device=device) * 0.02).requires_grad_(backward)
    labels = torch.randint(0, vocab, (tokens,), device=device)
    result: dict[str, float] = {}
    with torch.set_grad_enabled(backward), meter.measure(result):
        output = objective(states, weight, labels)
        if backward:
            output.sum().backward()
    grads = sum(t.grad.numel() * t.grad.element_size() for t in (states, weight) if t.grad is not None)
    return result["peak"] - grads, result


def logits_case(meter: Meter, tokens: int, hidden: int, vocab: int, method: str, backward: bool) -> dict[str, Any]:
    """The log-prob computation alone."""
    measured, result = head_bytes(
        meter, tokens, hidden, vocab, backward, lambda states, weight, labels: log_probs(method, states, weight, labels)
    )
    counted = min(tokens, FUSED_CHUNK) if method == "fused" else tokens
    return {
        "phase": "logits" + ("+backward" if backward else ""),
        "method": method,
        "tokens": tokens,
        "hidden": hidden,
        "vocab": vocab,
        "measured_bytes": measured,
        "predicted_bytes": memory.logits_bytes(method, tokens, vocab, backward),
        # per token x vocab, counting one chunk's tokens on the fused path
        "bytes_per_token_vocab": round(measured / (counted * vocab), 3),
        **fragmentation(result),
    }


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """verl's entropy_from_logits: logsumexp minus the softmax-weighted logits, in the logits' dtype."""
    probabilities = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probabilities * logits).sum(-1)


def logprobs_with_entropy(
    method: str,
    entropy: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
) -> torch.Tensor:
    """verl's order: the entropy from the logits, then the log-probs (flash-attn's without its in-place backward)."""
    logits = F.linear(hidden, weight)
    entropies = entropy(logits)
    log_probs = logprobs_flash(logits, labels, False) if method == "flash" else logprobs_torch(logits, labels)
    return log_probs + 0.001 * entropies


@functools.cache
def compiled_entropy() -> Callable[[torch.Tensor], torch.Tensor]:
    """verl's default (actor.use_torch_compile): the same function through torch.compile(dynamic=True)."""
    return torch.compile(entropy_from_logits, dynamic=True)


def entropy_case(
    meter: Meter, tokens: int, hidden: int, vocab: int, backward: bool, compiled: bool, method: str = "torch"
) -> dict[str, Any]:
    """Log-probs plus the entropy (entropy_coeff != 0), eager or compiled as verl runs it: what the entropy adds per
    token x vocab is this row's measurement less the same path's alone at the same size (with flash-attn, less its
    in-place logits too: the grad copy verl's choice costs is counted with the entropy). The compiled function is
    run once at the same size first, so compilation and autotuning stay out of the measurement."""
    entropy = compiled_entropy() if compiled else entropy_from_logits
    objective = partial(logprobs_with_entropy, method, entropy)
    if compiled:
        head_bytes(meter, tokens, hidden, vocab, backward, objective)
    measured, result = head_bytes(meter, tokens, hidden, vocab, backward, objective)
    variant = "compiled" if compiled else "eager"
    per_entropy = memory.ENTROPY_BYTES_PER_TOKEN_VOCAB[variant][0 if backward else 1]
    predicted = memory.logits_bytes(method, tokens, vocab, backward) + per_entropy * tokens * vocab
    if method == "flash" and backward:
        predicted += memory.FLASH_GRAD_COPY_BYTES_PER_TOKEN_VOCAB * tokens * vocab
    return {
        "phase": "logits+entropy" + ("+backward" if backward else ""),
        "method": method,
        "entropy": variant,
        "tokens": tokens,
        "hidden": hidden,
        "vocab": vocab,
        "measured_bytes": measured,
        "predicted_bytes": predicted,
        "bytes_per_token_vocab": round(measured / (tokens * vocab), 3),
        **fragmentation(result),
    }


def fragmentation(result: dict[str, float]) -> dict[str, float]:
    if "reserved_over_allocated" not in result:
        return {}
    return {"reserved_over_allocated": round(result["reserved_over_allocated"], 4)}


# --- decoder layers: training step and log-prob pass ----------------------------------------------------------------


def build_model(shape: Shape, device: torch.device) -> torch.nn.Module:
    """HF Qwen2 from a config, random weights, bf16 (the compute copy FSDP gathers), no download."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

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
    config._attn_implementation = "sdpa"  # flash-attn's memory shape: O(seq) attention, no seq x seq scores kept
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    for param in model.parameters():
        # FSDP reduce-scatters each unit's gradient and frees the unsharded one: only its shard (counted by the
        # estimator as model state) outlives the unit's backward
        param.register_post_accumulate_grad_hook(lambda p: setattr(p, "grad", None))
    return model


def log_probs(method: str, hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    if method == "fused":
        return logprobs_fused(hidden, weight, labels)
    logits = F.linear(hidden, weight)
    return (logprobs_torch if method == "torch" else logprobs_flash)(logits, labels)


def model_case(meter: Meter, shape: Shape, phase: str, method: str, checkpointing: bool = True) -> dict[str, Any]:
    """phase "train": forward + backward of one micro-batch; "logprob": forward without grad."""
    model = build_model(shape, meter.device)
    model.train(phase == "train")
    if checkpointing and phase == "train":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    input_ids = torch.randint(0, shape.vocab, (shape.batch, shape.seq), device=meter.device)
    labels = input_ids.roll(-1, dims=1).flatten()

    def step() -> None:
        with torch.set_grad_enabled(phase == "train"):
            hidden = model.model(input_ids=input_ids).last_hidden_state.flatten(0, 1)
            logprobs = log_probs(method, hidden, model.lm_head.weight, labels)
            if phase == "train":
                logprobs.sum().backward()

    step()  # warm-up: cuBLAS workspaces, kernel autotuning
    result: dict[str, float] = {}
    with meter.measure(result):
        step()
    arch = shape.architecture()
    if phase == "train":
        terms = memory.training_dynamic(arch, checkpointing, method, shape.tokens, 0.0)
    else:
        terms = memory.logprob_dynamic(arch, method, shape.tokens, 0.0)
    return {
        "phase": phase,
        "method": method,
        "checkpointing": checkpointing if phase == "train" else None,
        "shape": asdict(shape),
        "tokens": shape.tokens,
        "measured_bytes": result["peak"],
        "predicted_bytes": sum(terms.values()),
        "predicted_terms": terms,
        **fragmentation(result),
    }


# --- the plan of measurements, and the fit ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    logits: tuple[tuple[int, int, int], ...]  # (tokens, hidden, vocab)
    layer_fit: tuple[Shape, ...]  # small vocabulary: the layers dominate
    held_out: tuple[tuple[Shape, str, bool], ...]  # real vocabulary: (shape, method, checkpointing)
    logprob: tuple[Shape, ...]


QWEN_VOCAB = 151936
GPU_SIZES = Sizes(
    logits=((4096, 3584, 152064), (8192, 1536, QWEN_VOCAB), (16384, 896, QWEN_VOCAB)),
    layer_fit=(
        Shape(4, 3584, 28, 4, 18944, 2048, 2, 4096),  # Qwen2.5-7B's layers
        Shape(8, 1536, 12, 2, 8960, 2048, 4, 4096),  # 1.5B's
        Shape(8, 896, 14, 2, 4864, 2048, 4, 4096),  # 0.5B's
        Shape(4, 5120, 40, 8, 13824, 2048, 2, 4096),  # 14B's (a different intermediate/hidden ratio)
    ),
    held_out=(
        (Shape(24, 896, 14, 2, 4864, QWEN_VOCAB, 4, 2048), "torch", True),  # Qwen2.5-0.5B
        (Shape(28, 1536, 12, 2, 8960, QWEN_VOCAB, 4, 2048), "torch", True),  # Qwen2.5-1.5B
        (Shape(28, 1536, 12, 2, 8960, QWEN_VOCAB, 2, 2048), "torch", False),
        (Shape(6, 3584, 28, 4, 18944, 152064, 4, 2048), "fused", True),  # 7B's shapes, 6 layers
        (Shape(6, 3584, 28, 4, 18944, 152064, 4, 2048), "flash", True),
        (Shape(8, 3584, 28, 4, 18944, 152064, 8, 2048), "torch", True),
        (Shape(28, 1536, 12, 2, 8960, QWEN_VOCAB, 8, 2048), "fused", True),
        (Shape(4, 5120, 40, 8, 13824, 152064, 2, 2048), "torch", False),  # 14B's layers
    ),
    logprob=(
        Shape(24, 896, 14, 2, 4864, QWEN_VOCAB, 16, 2048),
        Shape(28, 1536, 12, 2, 8960, QWEN_VOCAB, 8, 2048),
        Shape(6, 3584, 28, 4, 18944, 152064, 8, 2048),
        Shape(4, 5120, 40, 8, 13824, 152064, 8, 2048),
    ),
)
TINY_SIZES = Sizes(
    logits=((128, 64, 512), (256, 32, 1024)),
    layer_fit=(Shape(2, 64, 4, 2, 176, 64, 2, 64), Shape(2, 96, 4, 2, 384, 64, 2, 64)),
    held_out=((Shape(2, 64, 4, 2, 176, 512, 2, 64), "torch", True),),
    logprob=(Shape(2, 64, 4, 2, 176, 512, 2, 64),),
)


def lstsq(rows: list[dict[str, Any]], target: Callable[[dict[str, Any]], float]) -> tuple[float, float] | None:
    """Per-token bytes = a x hidden + b x intermediate, least squares over the rows' shapes."""
    if len(rows) < 2:
        return None
    design = torch.tensor([[r["shape"]["hidden"], r["shape"]["intermediate"]] for r in rows], dtype=torch.float64)
    values = torch.tensor([target(r) for r in rows], dtype=torch.float64).unsqueeze(-1)
    a, b = torch.linalg.lstsq(design, values).solution.squeeze(-1).tolist()
    return round(a, 2), round(b, 2)


def fit(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The estimator's coefficients as these measurements give them: the worst per-unit cost of each logits path;
    a layer's saved activations (no recomputation) and, with recomputation, the recomputed layer, each taking out
    the other terms at the estimator's own values."""
    per_path: dict[str, dict[str, float]] = {}
    for row in rows:
        if row["phase"].startswith("logits+entropy"):
            continue
        if row["phase"].startswith("logits"):
            kind = "training" if row["phase"].endswith("backward") else "forward"
            slot = per_path.setdefault(row["method"], {})
            slot[kind] = max(slot.get(kind, 0.0), row["bytes_per_token_vocab"])
    layer_rows = [row for row in rows if row.get("fit") and row["phase"] == "train"]

    def other(row: dict[str, Any], keep: str) -> float:
        return sum(value for name, value in row["predicted_terms"].items() if name != keep)

    def per_layer_token(row: dict[str, Any]) -> float:
        return (row["measured_bytes"] - other(row, "activations")) / (row["tokens"] * row["shape"]["layers"])

    def recomputed_per_token(row: dict[str, Any]) -> float:
        return (row["measured_bytes"] - row["predicted_terms"]["activations"]) / row["tokens"]

    entropy: dict[str, dict[str, float]] = {}
    for row in rows:
        if row["phase"].startswith("logits+entropy"):
            kind = "training" if row["phase"].endswith("backward") else "forward"
            alone = per_path.get(row["method"], {}).get(kind, 0.0)
            variant = row.get("entropy", "eager") + ("" if row["method"] == "torch" else f"+{row['method']}")
            slot = entropy.setdefault(variant, {})
            slot[kind] = round(max(slot.get(kind, 0.0), row["bytes_per_token_vocab"] - alone), 3)
    return {
        "entropy_bytes_per_token_vocab": entropy,
        "logits_bytes_per_token_vocab": per_path,
        "layer_bytes_per_token": lstsq([r for r in layer_rows if not r["checkpointing"]], per_layer_token),
        "recompute_bytes_per_token": lstsq([r for r in layer_rows if r["checkpointing"]], recomputed_per_token),
    }


def accuracy(rows: list[dict[str, Any]]) -> dict[str, float]:
    """measured / predicted over the whole-model rows not used by the fit (held out) and over all of them."""
    ratios = [row["measured_bytes"] / row["predicted_bytes"] for row in rows if row.get("predicted_bytes")]
    held = [
        r["measured_bytes"] / r["predicted_bytes"]
        for r in rows
        if r["phase"] in ("train", "logprob") and not r.get("fit")
    ]
    return {
        "rows": len(ratios),
        "max_ratio": round(max(ratios, default=0.0), 3),
        "min_ratio": round(min(ratios, default=0.0), 3),
        "held_out_max_ratio": round(max(held, default=0.0), 3),
        "held_out_min_ratio": round(min(held, default=0.0), 3),
    }


def margins(rows: list[dict[str, Any]], device: torch.device) -> dict[str, float]:
    ratios = [row["reserved_over_allocated"] for row in rows if "reserved_over_allocated" in row]
    out: dict[str, float] = {}
    if ratios:
        out["fragmentation_max"] = round(max(ratios) - 1, 4)
        out["fragmentation_median"] = round(sorted(ratios)[len(ratios) // 2] - 1, 4)
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info()
        out["non_torch_gib"] = round((total - free - torch.cuda.memory_reserved()) / memory.GIB, 3)
        out["total_gib"] = round(total / memory.GIB, 3)
    return out


def run_all(sizes: Sizes, device: torch.device, log: Callable[[str], None]) -> dict[str, Any]:
    meter = Meter(device)
    methods = ["torch", "fused"] + (["flash"] if device.type == "cuda" and flash_cross_entropy() else [])
    rows: list[dict[str, Any]] = []

    def record(case: Callable[[], dict[str, Any]], **extra: Any) -> None:
        try:
            row = case() | extra
        except torch.OutOfMemoryError as error:  # one size too big for this card must not lose the others
            log(f"out of memory, skipped: {str(error).splitlines()[0]}")
            return
        rows.append(row)
        log(describe(row))

    for tokens, hidden, vocab in sizes.logits:
        for method in methods:
            for backward in (False, True):
                record(partial(logits_case, meter, tokens, hidden, vocab, method, backward))
        # compiled only on CUDA: inductor's CPU code keeps an fp32 copy of the logits that its Triton code does not
        for compiled in (False, True) if device.type == "cuda" else (False,):
            for method in {"torch", "flash"} & set(methods):
                for backward in (False, True):
                    record(partial(entropy_case, meter, tokens, hidden, vocab, backward, compiled, method))
    for shape in sizes.layer_fit:
        for checkpointing in (True, False):
            record(partial(model_case, meter, shape, "train", "torch", checkpointing), fit=True)
    fitted = fit(rows)
    for shape, method, checkpointing in sizes.held_out:
        if method in methods:
            record(partial(model_case, meter, shape, "train", method, checkpointing))
    for shape in sizes.logprob:
        for method in methods:
            record(partial(model_case, meter, shape, "logprob", method))
    return {
        "rows": rows,
        "fitted": fitted,
        "accuracy": accuracy(rows),
        "margins": margins(rows, device),
        "methods": methods,
    }


def describe(row: dict[str, Any]) -> str:
    measured, predicted = row["measured_bytes"] / memory.GIB, row["predicted_bytes"] / memory.GIB
    if row["phase"].startswith("logits"):
        what = f"{row['tokens']:>6} tok h{row['hidden']} V{row['vocab']} = {row['bytes_per_token_vocab']:6.2f} B/tok·V"
    else:
        shape = row["shape"]
        ckpt = {True: " ckpt", False: " full", None: ""}[row["checkpointing"]]
        what = f"{row['tokens']:>6} tok L{shape['layers']} h{shape['hidden']} V{shape['vocab']}{ckpt}"
    return (
        f"{row['phase']:15} {row['method']:5} {what:42} measured {measured:7.3f} GiB  predicted {predicted:7.3f} GiB"
        f"  ratio {measured / max(predicted, 1e-12):5.2f}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="gpu_memory.py", description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run on CPU (with --tiny: the arithmetic check)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (seconds on CPU)")
    parser.add_argument("--json", type=Path, help="write every measurement, the fit and the margins here")
    args = parser.parse_args(argv)
    if not args.cpu and not torch.cuda.is_available():
        # `make bench` runs every benchmark: on a machine without a GPU this one has nothing to measure
        print(
            "gpu_memory.py: no CUDA device here, nothing measured; run it on a GPU node "
            "(--cpu --tiny checks the arithmetic)"
        )
        return
    device = torch.device("cpu" if args.cpu else "cuda")
    started = time.perf_counter()
    result = run_all(TINY_SIZES if args.tiny else GPU_SIZES, device, lambda line: print(line, flush=True))
    result |= {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "seconds": round(time.perf_counter() - started, 1),
    }
    for key in ("fitted", "accuracy", "margins"):
        print(f"{key}: {json.dumps(result[key])}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
