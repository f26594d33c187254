"""The one-GPU public cases reproduced on a GPU: verl's training and log-prob micro-batches, built as verl builds them.

Runs on: a bare CUDA machine (torch, transformers and peft; flash-attn's Triton cross-entropy when importable), or on
CPU at tiny sizes (`--cpu --tiny`, what tests/test_gpu_memory_kit.py runs so the code keeps working).

    python bench/gpu_cases.py --json cases.json        # on the GPU node; a few minutes on an H100

bench/gpu_memory.py measures each term of the estimator alone. This measures whole phases as a verl job on one GPU
runs them, for the public cases of tests/data/public_cases.yaml that ran on one GPU (verl's LoRA tuning scripts):
the model from conf/llm/ with random weights (no download) in fp32, LoRA on every linear (peft, as verl's FSDP
engine applies it), FSDP (world size 1, bf16 compute, fp32 reduce, one unit per decoder layer), gradient
checkpointing, expandable segments on (verl turns them on for training), sequences at the case's typical length,
and verl's head on the remove-padding path: bf16 logits, the entropy through torch.compile, then the log-probs
(flash-attn's cross-entropy without its in-place backward when entropy is computed, else pure torch row by row).

Each case is measured at its micro-batch and at half of it, so the peak's growth per sequence gives the largest
micro-batch this card holds (what verl's tuning searches looked for) without running out of memory to find it.
Predictions are not made here: bench/preflight_accuracy.py and tests/test_public_cases.py compare these numbers with
the preflight (the kit needs no config tree).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
import yaml

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from bench.gpu_memory import compiled_entropy, entropy_from_logits, flash_cross_entropy, logprobs_torch  # noqa: E402
from bench.preflight_accuracy import load_cases  # noqa: E402  (yaml only at import: no config tree needed)

GIB = 1024**3


@dataclass(frozen=True)
class Case:
    name: str
    llm: dict[str, Any]
    sequences: int  # per GPU, per micro-batch
    sequence_tokens: int
    outcome: str
    lora_rank: int
    entropy: bool
    checkpointing: bool = True
    flash: bool = True  # flash-attn in the job's environment (the case's own `flash_attn`)


def override_values(overrides: list[str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in overrides if "=" in item and not item.startswith("~"))


def one_gpu_cases() -> list[Case]:
    """The public cases that ran on one GPU without a critic (the actor's phases: an engine or a critic beside it is
    not built here)."""
    cases = []
    for case in load_cases():
        values = override_values(case["overrides"])
        one_gpu = values.get("trainer.n_gpus_per_node") == "1" and values.get("trainer.nnodes", "1") == "1"
        lora = int(values.get("actor_rollout_ref.model.lora_rank", 0))
        if not one_gpu or "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" not in values:
            continue
        if values.get("algorithm.adv_estimator") == "gae":  # a critic beside the actor: this kit builds the actor only
            continue
        sequence = int(values["data.max_prompt_length"]) + int(values["data.max_response_length"])
        llm = yaml.safe_load((PROJECT / "conf" / "llm" / f"{values['llm']}.yaml").read_text())
        cases.append(
            Case(
                name=case["name"],
                llm=llm,
                sequences=int(values["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"]),
                # the lengths the case's data had, as it states them (launch.expect.*), else full length
                sequence_tokens=int(values.get("launch.expect.prompt_tokens", 0))
                + int(values.get("launch.expect.response_tokens", 0))
                or sequence,
                outcome=case["outcome"],
                lora_rank=lora,
                entropy=float(values.get("actor_rollout_ref.actor.entropy_coeff", 0)) != 0,
                checkpointing=values.get("actor_rollout_ref.model.enable_gradient_checkpointing", "true") == "true",
                flash=bool(case["flash_attn"]),
            )
        )
    return cases


def tiny_cases() -> list[Case]:
    llm = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "intermediate": 176, "vocab": 512}
    tied = llm | {"tied_embeddings": True}
    return [Case("tiny LoRA", tied, 4, 32, "fit", 8, True), Case("tiny full", tied, 4, 32, "fit", 0, False, False)]


# --- the model, as verl's FSDP engine builds it -----------------------------------------------------------------------


def build(case: Case, device: torch.device) -> torch.nn.Module:
    from peft import LoraConfig, TaskType, get_peft_model
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision
    from torch.distributed.fsdp.wrap import _or_policy, lambda_auto_wrap_policy, transformer_auto_wrap_policy
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer

    llm = case.llm
    config = Qwen2Config(
        hidden_size=llm["hidden"],
        intermediate_size=llm["intermediate"],
        num_hidden_layers=llm["layers"],
        num_attention_heads=llm["heads"],
        num_key_value_heads=llm["kv_heads"],
        head_dim=llm["head_dim"],
        vocab_size=llm["vocab"],
        max_position_embeddings=4096,
        tie_word_embeddings=bool(llm.get("tied_embeddings")),
        use_cache=False,
    )
    config._attn_implementation = "sdpa"  # flash-attn's memory shape: no seq x seq scores kept
    with torch.device(device):
        model = Qwen2ForCausalLM(config)  # fp32: verl trains from an fp32 copy (model_dtype)
    if case.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    if case.lora_rank:
        lora = LoraConfig(task_type=TaskType.CAUSAL_LM, r=case.lora_rank, lora_alpha=16, target_modules="all-linear")
        model = get_peft_model(model, lora)
    if device.type != "cuda":  # FSDP (v1, verl's default strategy) needs an accelerator: the CPU run checks the code
        return model
    # verl's wrap policy for LoRA (verl/utils/fsdp_utils.get_fsdp_wrap_policy): each trainable leaf (a LoRA matrix)
    # is its own unit, so a decoder layer's flat parameter holds frozen weights only and gets no gradient
    trainable_leaf = functools.partial(
        lambda_auto_wrap_policy,
        lambda_fn=lambda module: (
            not list(module.children()) and getattr(module, "weight", None) is not None and module.weight.requires_grad
        ),
    )
    layers = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Qwen2DecoderLayer})
    return FullyShardedDataParallel(
        model,
        auto_wrap_policy=functools.partial(_or_policy, policies=[trainable_leaf, layers]),
        mixed_precision=MixedPrecision(
            param_dtype=torch.bfloat16,
            reduce_dtype=torch.float32,
            buffer_dtype=torch.float32,
            cast_forward_inputs=True,  # peft casts a LoRA matrix's input to its fp32 weight before the unit casts it
        ),
        device_id=device,
        use_orig_params=False,  # verl's default
    )


def head(logits: torch.Tensor, labels: torch.Tensor, entropy: bool, compiled: bool, flash: bool) -> torch.Tensor:
    """verl's remove-padding head (engine/fsdp transformer_impl): the entropy first, then the log-probs; flash-attn's
    cross-entropy keeps the logits for backward when the entropy needs them."""
    objective = torch.zeros((), device=logits.device)
    if entropy:
        objective = objective - 0.001 * (compiled_entropy() if compiled else entropy_from_logits)(logits).mean()
    cross_entropy = flash_cross_entropy() if flash else None
    if cross_entropy is not None:
        log_probs = -cross_entropy(logits, labels, inplace_backward=not entropy)[0]
    else:
        log_probs = logprobs_torch(logits, labels)
    return objective - log_probs.mean()


@contextlib.contextmanager
def peak(result: dict[str, float], device: torch.device) -> Iterator[None]:
    gc.collect()
    if device.type != "cuda":
        yield
        return
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    result["states_gib"] = torch.cuda.memory_allocated() / GIB
    yield
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    result["allocated_gib"] = torch.cuda.max_memory_allocated() / GIB
    result["reserved_gib"] = torch.cuda.max_memory_reserved() / GIB
    result["non_torch_gib"] = (total - free - torch.cuda.memory_reserved()) / GIB
    result["total_gib"] = result["reserved_gib"] + result["non_torch_gib"]


def step(model: torch.nn.Module, case: Case, sequences: int, train: bool, device: torch.device) -> None:
    """One micro-batch of `sequences` sequences of the case's typical length. verl packs them into one row for
    flash-attn's varlen kernel; a batch of equal-length rows holds the same bytes per token without a mask."""
    input_ids = torch.randint(0, case.llm["vocab"], (sequences, case.sequence_tokens), device=device)
    labels = input_ids.roll(-1, dims=1).flatten()
    compiled = device.type == "cuda"  # inductor's CPU code has another memory shape (bench/gpu_memory.py)
    with torch.set_grad_enabled(train):
        logits = model(input_ids=input_ids).logits.flatten(0, 1)  # (tokens, vocab), as verl's squeeze(0)
        objective = head(logits, labels, case.entropy, compiled, case.flash)
        del logits
        if train:
            objective.backward()


def update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, case: Case, sequences: int, device: torch.device):
    """What verl does with a mini-batch: micro-batches whose gradients accumulate (FSDP keeps each one's sharded
    fp32 gradient for the next), then AdamW's step and the gradients dropped."""
    for _ in range(MICRO_BATCHES_PER_UPDATE):
        step(model, case, sequences, True, device)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


MICRO_BATCHES_PER_UPDATE = 2
SIZES = (("train", 1), ("train_half", 2), ("train_quarter", 4))  # the micro-batch, divided by


def measure(case: Case, device: torch.device, log: Callable[[str], None], adamw: str = "foreach") -> dict[str, Any]:
    """A training update at the case's micro-batch, half and a quarter of it, then a log-prob micro-batch."""
    model = build(case, device)
    trainable = [param for param in model.parameters() if param.requires_grad]
    fused = adamw == "fused" and device.type == "cuda"
    optimizer = torch.optim.AdamW(trainable, lr=1e-6, fused=fused or None, foreach=None if fused else True)
    rows: dict[str, Any] = {}
    plan = [(label, max(1, case.sequences // divisor), True) for label, divisor in SIZES]
    for label, sequences, train in [*plan, ("logprob", case.sequences, False)]:
        model.train(train)
        result: dict[str, Any] = {"sequences": sequences}
        run = partial(update, model, optimizer) if train else partial(step, model, train=False)
        try:
            run(case, sequences, device=device)  # warm-up: compilation, cuBLAS workspaces, AdamW's state
            with peak(result, device):
                run(case, sequences, device=device)
        except torch.OutOfMemoryError as error:
            result["out_of_memory"] = str(error).splitlines()[0]
            optimizer.zero_grad(set_to_none=True)
        rows[label] = result
        log(f"{case.name:45} {label:13} {describe(result)}")
    return {
        "name": case.name,
        "outcome_reported": case.outcome,
        "sequences": case.sequences,
        "sequence_tokens": case.sequence_tokens,
        "training_update": f"{MICRO_BATCHES_PER_UPDATE} micro-batches, then AdamW's step ({adamw})",
        **rows,
    }


def describe(result: dict[str, float]) -> str:
    if "out_of_memory" in result:
        return f"{result['sequences']:4} seqs: OUT OF MEMORY ({result['out_of_memory'][:80]})"
    if "total_gib" not in result:
        return f"{result['sequences']:4} seqs: ran (no CUDA statistics on CPU)"
    return (
        f"{result['sequences']:4} seqs: states {result['states_gib']:6.2f}  allocated {result['allocated_gib']:6.2f}"
        f"  reserved {result['reserved_gib']:6.2f}  non-torch {result['non_torch_gib']:5.2f}"
        f"  total {result['total_gib']:6.2f} GiB"
    )


def largest_micro_batch(result: dict[str, Any], capacity_gib: float) -> int | None:
    """The micro-batch whose training peak (reserved + outside torch) reaches the card, from the two largest sizes
    that ran (the peak grows linearly with the sequences)."""
    ran = sorted(
        (result[label] for label, _ in SIZES if "total_gib" in result[label]), key=lambda row: -row["sequences"]
    )
    if len(ran) < 2 or ran[0]["sequences"] == ran[1]["sequences"]:
        return None
    big, small = ran[0], ran[1]
    per_sequence = (big["total_gib"] - small["total_gib"]) / (big["sequences"] - small["sequences"])
    if per_sequence <= 0:
        return None
    return int(small["sequences"] + (capacity_gib - small["total_gib"]) / per_sequence)


def run_case(case: Case, device: torch.device, adamw: str = "foreach") -> dict[str, Any]:
    capacity = 0.0
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.cuda.memory._set_allocator_settings("expandable_segments:True")
        capacity = torch.cuda.mem_get_info()[1] / GIB
    torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=0, world_size=1)
    try:
        result = measure(case, device, lambda line: print(line, flush=True), adamw)
    finally:
        torch.distributed.destroy_process_group()
    result["largest_micro_batch"] = largest_micro_batch(result, capacity)
    result["capacity_gib"] = round(capacity, 3)
    result["device"] = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    print(f"{case.name:45} largest micro-batch on this card: {result['largest_micro_batch']}", flush=True)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="gpu_cases.py", description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--case", default="", help=argparse.SUPPRESS)
    parser.add_argument(
        "--adamw", choices=("foreach", "fused"), default="foreach", help="torch's AdamW implementation (verl: foreach)"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not args.cpu and not torch.cuda.is_available():
        print("gpu_cases.py: no CUDA device here, nothing measured; run it on a GPU node (--cpu --tiny checks it)")
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    started = time.perf_counter()
    cases = [case for case in (tiny_cases() if args.tiny else one_gpu_cases()) if args.only in case.name]
    if args.case:  # one case in this process (the parent's child): nothing left over from another case's model
        case = next(case for case in cases if case.name == args.case)
        print(json.dumps(run_case(case, torch.device("cpu") if args.cpu else torch.device("cuda", 0), args.adamw)))
        return
    # the parent never touches the GPU: its CUDA context would take memory from the cases
    results = []
    for case in cases:
        argv = [sys.executable, __file__, "--case", case.name, "--adamw", args.adamw]
        argv += ["--cpu"] * args.cpu + ["--tiny"] * args.tiny
        child = subprocess.run(argv, stdout=subprocess.PIPE, text=True)
        lines = child.stdout.strip().splitlines()
        print("\n".join(lines[:-1]), flush=True)
        if child.returncode != 0:
            print(f"{case.name}: its process failed (exit {child.returncode})", flush=True)
            continue
        results.append(json.loads(lines[-1]))
    report = {
        "cases": results,
        "device": results[0]["device"] if results else "none",
        "capacity_gib": results[0]["capacity_gib"] if results else 0.0,
        "flash_cross_entropy": flash_cross_entropy() is not None,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "peft": __import__("peft").__version__,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
