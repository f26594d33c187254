"""PCGrad's step cost on CPU, with ratios against baselines measured in the same run:

- plain: gradient accumulation over the batch, one optimizer step (what guru_baseline does);
- pcgrad: ours (algos/sharded.py): the same backward passes grouped by task, each task's gradient moved into a
  float32 buffer, one Gram matrix, T weights, one weighted sum, one optimizer step;
- naive: the public ports' way: T backward passes into full gradient copies, the projections done on the full
  vectors (a second set of T copies), then the sum.

A fixed tiny model built from a config (Qwen2: 4 layers, hidden 256, vocab 32k), 12 micro-batches of 2 x 256
tokens, 2 per task (T = 6), AdamW. Each method runs updates of a few optimizer steps (PCGrad's buffers live for one
update, as in verl: allocated at its first mini-batch, freed after its last), and the methods' updates are
interleaved so that load from other processes on the machine hits them alike; ratios are the median over rounds of
the same-round ratio to plain, for wall time and for the process's CPU time. Peak memory: the largest RSS above the
update's starting RSS, sampled every millisecond. Target: pcgrad <= 1.15 x plain.

On a CUDA machine (`--device cuda`, needs only torch and transformers) the same three methods run on the GPU, timed
with synchronisation, and the peak is torch's allocated memory above the update's start; `--model qwen2_5_0_5b`
takes Qwen2.5-0.5B's shape (random weights, no download) with longer micro-batches. Results of such a run are
recorded in bench/results/.

Usage: python bench/pcgrad.py [--rounds 3] [--mini-batches 2] [--device cpu|cuda] [--model tiny|qwen2_5_0_5b]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from algos.pcgrad import random_order  # noqa: E402
from algos.sharded import TaskGradientBuffers, sharded_pcgrad  # noqa: E402

TASKS = 6
MICRO_PER_TASK = 2
# name -> (Qwen2 shape, micro-batch, sequence length)
MODELS = {
    "tiny": (dict(vocab_size=32_000, hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=False), 2, 256),
    "qwen2_5_0_5b": (dict(vocab_size=151_936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                          num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True), 4, 1024),
}  # fmt: skip


def commit() -> str:
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=PROJECT, capture_output=True, text=True).stdout
    return (sha.stdout.strip() or "unknown") + ("+dirty" if dirty.strip() else "")


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRss:
    """Peak resident memory above the starting point while the block runs (a sampling thread)."""

    def __enter__(self) -> PeakRss:
        self.start = rss_bytes()
        self.peak = self.start
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, rss_bytes())
            time.sleep(0.001)

    def __exit__(self, *exc: object) -> None:
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def extra_mib(self) -> float:
        return (self.peak - self.start) / 2**20


class PeakCuda:
    """Peak of torch's allocated CUDA memory above the update's start (and the work synchronised at both ends)."""

    def __enter__(self) -> PeakCuda:
        torch.cuda.synchronize()
        self.start = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc: object) -> None:
        torch.cuda.synchronize()
        self.peak = torch.cuda.max_memory_allocated()

    @property
    def extra_mib(self) -> float:
        return (self.peak - self.start) / 2**20


def build_model(shape: dict, seq: int, device: str) -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**shape, max_position_embeddings=seq, attn_implementation="sdpa")
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config).to(device)


def make_batch(vocab: int, micro_batch: int, seq: int, device: str) -> list[list[torch.Tensor]]:
    """task -> its micro-batches of token ids."""
    generator = torch.Generator().manual_seed(0)
    return [
        [torch.randint(0, vocab, (micro_batch, seq), generator=generator).to(device) for _ in range(MICRO_PER_TASK)]
        for _ in range(TASKS)
    ]


def backward(model: torch.nn.Module, tokens: torch.Tensor, scale: float) -> None:
    loss = model(input_ids=tokens, labels=tokens).loss * scale
    loss.backward()


def plain_step(model, optimizer, batch) -> None:
    optimizer.zero_grad(set_to_none=False)
    micro_batches = [tokens for task in batch for tokens in task]
    for tokens in micro_batches:
        backward(model, tokens, 1.0 / len(micro_batches))
    optimizer.step()


def pcgrad_step(model, optimizer, batch, step: int, buffers: TaskGradientBuffers) -> None:
    """As algos/verl_pcgrad.py's step does it (the buffers live for the mini-batches of one update)."""
    optimizer.zero_grad(set_to_none=False)
    micro_batches = sum(len(task) for task in batch)
    buffers.restart(len(batch))
    for index, task in enumerate(batch):
        for tokens in task:
            backward(model, tokens, 1.0 / micro_batches)
        buffers.capture(index)
    sharded_pcgrad(buffers, None, random_order(len(batch), torch.Generator().manual_seed(step)))
    optimizer.step()


def naive_step(model, optimizer, batch, step: int) -> None:
    """The popular port: full gradient copies per task, projections on the full vectors, then the sum."""
    params = [p for p in model.parameters() if p.requires_grad]
    micro_batches = sum(len(task) for task in batch)
    grads = []
    for task in batch:
        optimizer.zero_grad(set_to_none=False)
        for tokens in task:
            backward(model, tokens, 1.0 / micro_batches)
        grads.append(torch.cat([p.grad.reshape(-1) for p in params]))
    order = random_order(len(batch), torch.Generator().manual_seed(step))
    projected = [g.clone() for g in grads]
    for i, g_i in enumerate(projected):
        for j in order[i]:
            dot = torch.dot(g_i, grads[j])
            if dot < 0:
                g_i -= dot / torch.dot(grads[j], grads[j]) * grads[j]
    update = torch.stack(projected).sum(0)
    offset = 0
    for p in params:
        p.grad.copy_(update[offset : offset + p.numel()].view_as(p))
        offset += p.numel()
    optimizer.step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="measured updates per method (after one warm-up)")
    parser.add_argument("--mini-batches", type=int, default=2, help="optimizer steps per update (GURU: 8)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--model", choices=tuple(MODELS), default="tiny")
    args = parser.parse_args()

    shape, micro_batch, seq = MODELS[args.model]
    model = build_model(shape, seq, args.device)
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    batch = make_batch(shape["vocab_size"], micro_batch, seq, args.device)
    meter = PeakCuda if args.device == "cuda" else PeakRss

    def pcgrad_update(round_: int) -> None:
        # the step's lifecycle in verl: one allocation per update, freed after its last mini-batch
        buffers = TaskGradientBuffers(model.parameters(), num_tasks=TASKS)
        for mini in range(args.mini_batches):
            pcgrad_step(model, optimizer, batch, round_ * args.mini_batches + mini, buffers)
        buffers.release()

    methods = {
        "plain": lambda round_: [plain_step(model, optimizer, batch) for _ in range(args.mini_batches)],
        "pcgrad": pcgrad_update,
        "naive": lambda round_: [naive_step(model, optimizer, batch, round_) for _ in range(args.mini_batches)],
    }
    times: dict[str, list[float]] = {name: [] for name in methods}
    cpu_times: dict[str, list[float]] = {name: [] for name in methods}
    peaks: dict[str, list[float]] = {name: [] for name in methods}
    for round_ in range(args.rounds + 1):
        for name, update in methods.items():
            with meter() as peak:
                start, cpu_start = time.perf_counter(), time.process_time()
                update(round_)
                elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            if round_ > 0:  # the first round warms allocator, kernels and optimizer state
                times[name].append(elapsed / args.mini_batches)
                cpu_times[name].append(cpu / args.mini_batches)
                peaks[name].append(peak.extra_mib)

    def paired_ratios(measured: dict[str, list[float]]) -> dict[str, float]:
        """Interleaved rounds: the ratio within a round cancels the machine's load drift better than medians."""
        return {
            name: statistics.median(t / p for t, p in zip(measured[name], measured["plain"], strict=True))
            for name in methods
        }

    paired, paired_cpu = paired_ratios(times), paired_ratios(cpu_times)
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu, threads {torch.get_num_threads()}"
    print(f"bench/pcgrad.py  commit {commit()}  torch {torch.__version__}  {where}")
    print(
        f"model: Qwen2 {shape['num_hidden_layers']} layers, hidden {shape['hidden_size']}, vocab "
        f"{shape['vocab_size']} ({params / 1e6:.1f} M parameters, fp32); {TASKS * MICRO_PER_TASK} micro-batches of "
        f"{micro_batch} x {seq} tokens, {MICRO_PER_TASK} per task, T = {TASKS}; {args.rounds} updates of "
        f"{args.mini_batches} optimizer steps per method"
    )
    print("  (wall: step time; cpu: this process's CPU time, which other processes on a shared machine disturb less)")
    for name in methods:
        print(
            f"  {name:7s} wall {statistics.median(times[name]):6.2f} s  x{paired[name]:5.3f} plain   "
            f"cpu {statistics.median(cpu_times[name]):6.2f} s  x{paired_cpu[name]:5.3f} plain   "
            f"peak {'CUDA allocated' if args.device == 'cuda' else 'RSS'} above the update's start "
            f"{max(peaks[name]):7.1f} MiB   "
            f"wall per round {' '.join(f'{t:.2f}' for t in times[name])}"
        )
    buffers_mib = TASKS * params * 4 / 2**20
    print(
        f"  PCGrad's own memory: {TASKS} float32 task buffers = {buffers_mib:.1f} MiB (under FSDP: / GPUs); "
        f"naive: 2 x {TASKS} full copies = {2 * buffers_mib:.1f} MiB"
    )
    ratio, cpu_ratio = paired["pcgrad"], paired_cpu["pcgrad"]
    verdict = "met" if ratio <= 1.15 else "NOT met"
    print(f"target pcgrad <= 1.15 x plain (wall): {verdict} ({ratio:.3f}; cpu time {cpu_ratio:.3f})")


if __name__ == "__main__":
    main()
