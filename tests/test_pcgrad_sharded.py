"""PCGrad on FSDP-sharded gradients (algos/sharded.py) over 2 gloo processes on CPU, FSDP2 (fully_shard) and FSDP1 as
verl wraps it (flat parameters), against the single-process PCGrad of the full per-task gradients of the same tiny
transformer (built from a config).

What is compared, not assumed: the per-task gradients FSDP2 reduces over gloo (a torch version was reported to sum
instead of average, pytorch#162338: docs/facts.md#pcgrad), the Gram matrix assembled from shard Grams, the combined
gradient and the parameters after an optimizer step.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import socket
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2
VOCAB, SEQ = 61, 12
# task -> number of samples on rank 0 and rank 1; "table" is absent from rank 1 (which must contribute zero), "stem"
# is absent from the whole batch (its weight must be 0)
SAMPLES = {"math": (3, 2), "codegen": (1, 2), "table": (2, 0), "stem": (0, 0)}
TASKS = list(SAMPLES)
SEED = 11


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tiny_model() -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    torch.manual_seed(SEED)
    return Qwen2ForCausalLM(config).to(torch.float32)


def make_batches() -> dict[str, list[torch.Tensor]]:
    """task -> per-rank token batches (shape (n, SEQ), possibly n = 0)."""
    generator = torch.Generator().manual_seed(SEED)
    return {
        task: [torch.randint(0, VOCAB, (n, SEQ), generator=generator) for n in counts]
        for task, counts in SAMPLES.items()
    }


def token_loss_sum(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=tokens).logits
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, VOCAB), tokens[:, 1:].reshape(-1), reduction="sum"
    )


def reference(batches: dict[str, list[torch.Tensor]], order: list[list[int]]) -> dict:
    """Single process, full gradients: g_k = gradient of the token-mean loss over the WHOLE batch restricted to task
    k's tokens (so sum_k g_k is the baseline's gradient); then PCGrad from the core and one SGD step."""
    from algos.pcgrad import pcgrad

    model = tiny_model()
    total_tokens = sum(b.shape[0] for parts in batches.values() for b in parts) * (SEQ - 1)
    names = sorted(name for name, _ in model.named_parameters())
    params = [dict(model.named_parameters())[name] for name in names]
    task_grads = []
    for task in TASKS:
        tokens = torch.cat(batches[task])
        if tokens.shape[0] == 0:
            task_grads.append(torch.zeros(sum(p.numel() for p in params), dtype=torch.float64))
            continue
        grads = torch.autograd.grad(token_loss_sum(model, tokens) / total_tokens, params)
        task_grads.append(torch.cat([g.reshape(-1) for g in grads]).double())
    update = pcgrad(task_grads, order=order)
    return {
        "task_norms": torch.stack([g.norm() for g in task_grads]),
        "update": update,
        "plain_sum": torch.stack(task_grads).sum(0),
        "params": torch.cat([p.detach().reshape(-1) for p in params]).double(),
    }


def flat(named: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([named[name].reshape(-1) for name in sorted(named)]).double()


def sharded_rank(rank: int, rendezvous: str, strategy: str) -> None:
    # a rank that aborts in C++ (std::terminate) prints its Python stack first: the abort seen in CI left no trace
    faulthandler.enable(all_threads=True)
    # the ranks meet through a file, not a port picked by free_port() and bound later: under xdist, with Ray and SLURM
    # starting beside it, a port free when picked can be another process's by the time rank 0 binds it
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=WORLD)
    try:
        run_sharded(rank, strategy)
        dist.barrier()  # both ranks are past every collective before either tears gloo down
    finally:
        dist.destroy_process_group()
    # A rank that passed leaves without the interpreter's teardown: the aborts seen in CI ("terminate called without an
    # active exception") came after run_sharded had returned (faulthandler showed no Python frame on any thread), from
    # gloo's C++ threads destroyed at exit. A failing rank still raises above, and spawn reports its exception.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def shard(model: torch.nn.Module, strategy: str) -> torch.nn.Module:
    """FSDP2: fully_shard per decoder layer, then the root. FSDP1 as verl wraps it: flat parameters
    (use_orig_params=False), one unit per decoder layer plus the root, full sharding."""
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer

    if strategy == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (WORLD,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    return FSDP(
        model,
        auto_wrap_policy=ModuleWrapPolicy({Qwen2DecoderLayer}),
        sharding_strategy=ShardingStrategy.FULL_SHARD,
        use_orig_params=False,
        device_id=torch.device("cpu"),  # FSDP1 refuses to guess the CPU; named, it runs there
    )


@contextlib.contextmanager
def deferred_sync(model: torch.nn.Module, strategy: str, last: bool):
    """verl's gradient accumulation: no reduce-scatter before the last micro-batch of a forward_backward call."""
    if last:
        yield
    elif strategy == "fsdp2":
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
    else:
        with model.no_sync():
            yield


def run_sharded(rank: int, strategy: str) -> None:
    from algos.pcgrad import random_order
    from algos.sharded import TaskGradientBuffers, sharded_pcgrad

    torch.set_num_threads(1)
    batches = make_batches()
    order = random_order(len(TASKS), torch.Generator().manual_seed(SEED))  # the shared seed: same on both ranks
    expected = reference(batches, order)

    model = shard(tiny_model(), strategy)
    total_tokens = sum(b.shape[0] for parts in batches.values() for b in parts) * (SEQ - 1)
    buffers = TaskGradientBuffers(model.parameters(), num_tasks=len(TASKS))
    for index, task in enumerate(TASKS):
        tokens = batches[task][rank]
        # one sample per micro-batch, the same count on every rank (each forward all-gathers: a collective); a rank
        # short of samples of this task runs zero-weight micro-batches (loss x 0), contributing an exact zero
        micro_batches = max(SAMPLES[task])
        for micro in range(micro_batches):
            with deferred_sync(model, strategy, last=micro == micro_batches - 1):
                if micro < tokens.shape[0]:
                    # FSDP averages over ranks: scale by the world size, as verl's loss does with dp_size
                    loss = token_loss_sum(model, tokens[micro : micro + 1]) / total_tokens * WORLD
                else:
                    loss = token_loss_sum(model, torch.zeros(1, SEQ, dtype=torch.long)) * 0.0
                loss.backward()
        if micro_batches == 0:  # absent from the whole batch: nobody runs it, its buffer stays zero
            continue
        buffers.capture(index)

    result, gram = sharded_pcgrad(buffers, dist.group.WORLD, order)
    assert result.present.tolist() == [True, True, True, False]
    assert result.weights[3] == 0
    # the per-task gradients FSDP reduced over gloo are the single-process ones (not summed over ranks, not halved)
    torch.testing.assert_close(torch.sqrt(torch.diagonal(gram)), expected["task_norms"], rtol=1e-5, atol=1e-7)
    local = torch.sqrt(torch.diagonal(buffers.gram()))
    assert (local < expected["task_norms"] - 1e-6)[:3].all(), "each rank holds only a shard of each task gradient"

    params, grads = full_params_and_grads(model)
    torch.testing.assert_close(flat(grads), expected["update"], rtol=1e-4, atol=1e-6)
    assert result.conflicts > 0, "the test data must exercise a projection"
    assert not torch.allclose(flat(grads), expected["plain_sum"], atol=1e-4), "PCGrad must differ from the plain sum"

    torch.optim.SGD(model.parameters(), lr=0.5).step()
    stepped, _ = full_params_and_grads(model)
    torch.testing.assert_close(flat(stepped), expected["params"] - 0.5 * expected["update"], rtol=1e-5, atol=1e-6)
    buffers.release()


@pytest.mark.slow
# in clean-clone CI runs a rank aborted inside gloo with "terminate called without an active exception" (no Python
# error): about 1 run in 20, twice in a row on 2026-11-27 and again on 2026-11-29 (retry included). faulthandler showed
# no Python frame on any thread: the abort came at the rank's exit, which sharded_rank now skips once it has passed.
# One retry stays, never more
@pytest.mark.flaky(reruns=1)
@pytest.mark.parametrize("strategy", ["fsdp2", "fsdp1"])
def test_sharded_update_equals_single_process_pcgrad(strategy: str, tmp_path):
    mp.spawn(sharded_rank, args=(str(tmp_path / "rendezvous"), strategy), nprocs=WORLD, join=True)


def clean_name(name: str) -> str:
    for wrapper in ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod."):
        name = name.replace(wrapper, "")
    return name


def full_params_and_grads(module: torch.nn.Module) -> tuple[dict, dict]:
    """Full (unsharded) parameters and gradients by original name: FSDP2's DTensors, or FSDP1's flat shards (gathered
    and split with the flat parameter's own metadata). A collective: every rank calls it."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    params, grads = {}, {}
    if not isinstance(module, FSDP):
        for name, p in module.named_parameters():
            params[clean_name(name)] = p.detach().full_tensor().clone()
            grads[clean_name(name)] = p.grad.full_tensor().clone()
        return params, grads
    for prefix, fsdp_module in module.named_modules():
        if not isinstance(fsdp_module, FSDP) or fsdp_module._handle is None:
            continue
        flat = fsdp_module._handle.flat_param
        for source, target in ((flat.detach(), params), (flat.grad, grads)):
            shards = [torch.empty_like(source) for _ in range(dist.get_world_size())]
            dist.all_gather(shards, source.contiguous())
            full = torch.cat(shards)
            offset = 0
            for fqn, shape, numel in zip(flat._fqns, flat._shapes, flat._numels, strict=True):
                name = clean_name(f"{prefix}.{fqn}" if prefix else fqn)
                target[name] = full[offset : offset + numel].reshape(shape).clone()
                offset += numel
    return params, grads


def test_buffers_reused_across_mini_batches_start_clean():
    """The step reuses one allocation for the mini-batches of an update: a row captured in an earlier step and not
    in this one must read as an exact zero, and a task captured twice adds up."""
    from algos.sharded import TaskGradientBuffers, sharded_pcgrad

    layer = torch.nn.Linear(3, 2)
    buffers = TaskGradientBuffers(layer.parameters(), num_tasks=3)
    for task in range(3):
        layer(torch.full((1, 3), float(task + 1))).sum().backward()
        buffers.capture(task)
    assert torch.all(layer.weight.grad == 0), "capture leaves .grad zeroed for the next task"
    buffers.restart(2)
    layer(torch.ones(1, 3)).sum().backward()
    buffers.capture(0)
    layer(torch.ones(1, 3)).sum().backward()
    buffers.capture(0)  # the same task again (e.g. two calls): accumulated
    gram = buffers.gram()
    assert gram.shape == (2, 2) and gram[1].abs().sum() == 0 and gram[0, 0] > 0
    result, _ = sharded_pcgrad(buffers, None, [[1], [0]])
    assert result.weights.tolist() == [1.0, 0.0]
    torch.testing.assert_close(layer.weight.grad, torch.full((2, 3), 2.0))
    torch.testing.assert_close(layer.bias.grad, torch.full((2,), 2.0))
