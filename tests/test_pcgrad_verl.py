"""The PCGrad update path driven through verl 0.9.1 itself on CPU: 2 gloo ranks, verl's real FSDP2 engine, verl's
TrainingWorker.train_mini_batch (mini-batches), verl's micro-batching (fixed and dynamic batch size) and verl's
ppo_loss, into PcgradTrainingWorker's step. The gradient the optimizer sees at every step equals the single-process
PCGrad of per-task gradients computed directly (plain torch, the PPO objective written out) from the same parameters;
verl's stock worker's gradient on the same batch equals their plain sum (the baseline).

verl has no CPU platform: the test registers one through verl's own PlatformRegistry (its documented way to add a
backend) and tells the engine registry to use the FSDP engine (VERL_ENGINE_DEVICE=cuda selects the class only).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from test_pcgrad_sharded import free_port, full_params_and_grads

WORLD = 2
SEED = 5
PROMPT, RESPONSE = 5, 6
# 16 sequences; verl splits them into 2 contiguous rank chunks of 8, each into 2 mini-batches of 4. Mini-batch 0 of
# rank 0 holds table (absent from rank 1's mini-batch 0), mini-batch 1 has math on rank 1 only, and so on.
DATA_SOURCES = [
    # rank 0: mini-batch 0, mini-batch 1
    "math__deepscaler", "table__hitab", "math__deepscaler", "codegen__leetcode2k",
    "codegen__taco", "codegen__taco", "logic__zebra_puzzle", "logic__barc",
    # rank 1: mini-batch 0, mini-batch 1
    "math__deepscaler", "codegen__taco", "math__deepscaler", "math__deepscaler",
    "logic__barc", "math__deepscaler", "math__deepscaler", "codegen__leetcode2k",
]  # fmt: skip
MINI_BATCHES = 2
LR = 1e-4


def register_cpu_platform() -> None:
    """A CPU backend for verl's platform layer (verl would otherwise fall back to 'nvidia' and call torch.cuda)."""
    from verl.plugin.platform.platform_base import PlatformBase
    from verl.plugin.platform.platform_manager import PlatformRegistry

    class CpuDeviceModule:
        """torch.cpu plus the memory counters verl logs after each step (nothing to count on CPU)."""

        def __getattr__(self, name: str):
            return getattr(torch.cpu, name)

        def __eq__(self, other: object) -> bool:  # verl recognizes the CPU by `get_torch_device() == torch.cpu`
            return other is torch.cpu or other is self

        def __hash__(self) -> int:
            return hash(torch.cpu)

        def max_memory_allocated(self, device: object = None) -> int:
            return 0

        def max_memory_reserved(self, device: object = None) -> int:
            return 0

        def memory_allocated(self, device: object = None) -> int:
            return 0

        def memory_reserved(self, device: object = None) -> int:
            return 0

        def mem_get_info(self, device: object = None) -> tuple[int, int]:
            return 0, 0

    class PlatformCPU(PlatformBase):
        device_name = "cpu"
        vendor_name = "cpu"
        device_module = CpuDeviceModule()

        def is_available(self) -> bool:
            return True

        def current_device(self) -> str:
            return "cpu"

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            pass

        def synchronize(self, device_index: int | None = None) -> None:
            pass

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            pass

        def empty_cache(self) -> None:
            pass

        def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"

        @contextlib.contextmanager
        def nvtx_range(self, msg: str):
            yield

        def profiler_start(self) -> None:
            pass

        def profiler_stop(self) -> None:
            pass

        def cudart(self) -> None:
            return None

        def is_ipc_supported(self) -> bool:
            return False

        def ray_noset_envvars(self) -> list[str]:
            return []

        def ray_resource_name(self) -> str:
            return "CPU"

    PlatformRegistry.register(platform="rlaunch_test_cpu")(PlatformCPU)


def make_batch(model_dir: str) -> tuple:
    """A GRPO-shaped update batch in verl's padded layout (left-padded prompts, right-padded responses), converted by
    verl's own left_right_2_no_padding as its trainer does; per-task advantages of opposite signs make the task
    gradients conflict. old_log_probs = the current policy's log-probs shifted by +-0.4 or +-0.05, so some tokens sit
    in the clipped region and none near its boundary."""
    from transformers import AutoModelForCausalLM
    from verl import DataProto
    from verl.workers.utils.padding import left_right_2_no_padding

    generator = torch.Generator().manual_seed(SEED)
    size = len(DATA_SOURCES)
    prompt_lens = torch.randint(2, PROMPT + 1, (size,), generator=generator)
    response_lens = torch.randint(2, RESPONSE + 1, (size,), generator=generator)
    vocab = 300
    prompts = torch.zeros(size, PROMPT, dtype=torch.long)
    responses = torch.zeros(size, RESPONSE, dtype=torch.long)
    attention_mask = torch.zeros(size, PROMPT + RESPONSE, dtype=torch.long)
    for i in range(size):
        prompts[i, PROMPT - prompt_lens[i] :] = torch.randint(3, vocab, (int(prompt_lens[i]),), generator=generator)
        responses[i, : response_lens[i]] = torch.randint(3, vocab, (int(response_lens[i]),), generator=generator)
        attention_mask[i, PROMPT - prompt_lens[i] : PROMPT + response_lens[i]] = 1
    # codegen samples repeat math samples' tokens with advantages of the opposite sign: strongly conflicting tasks
    math_rows = [i for i, source in enumerate(DATA_SOURCES) if source.startswith("math")]
    for n, i in enumerate(i for i, source in enumerate(DATA_SOURCES) if source.startswith("codegen")):
        j = math_rows[n % len(math_rows)]
        prompts[i], responses[i], attention_mask[i] = prompts[j], responses[j], attention_mask[j]
    input_ids = torch.cat([prompts, responses], dim=1)
    position_ids = torch.clamp(torch.cumsum(attention_mask, dim=1) - 1, min=0)
    response_mask = attention_mask[:, PROMPT:].clone()
    sign = {"math": 1.0, "codegen": -1.0, "logic": 0.7, "table": -0.5}
    advantages = torch.stack(
        [
            (sign[source.split("__")[0]] + 0.3 * torch.randn((), generator=generator)) * response_mask[i].float()
            for i, source in enumerate(DATA_SOURCES)
        ]
    )
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    with torch.no_grad():
        current = response_log_probs(model, input_ids, attention_mask, position_ids)
    shifts = torch.tensor([0.4, -0.4, 0.05, -0.05])[torch.randint(0, 4, (size, RESPONSE), generator=generator)]
    old_log_probs = (current + shifts) * response_mask
    batch = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "response_mask": response_mask,
            "old_log_probs": old_log_probs,
            "advantages": advantages,
        },
        non_tensors={"data_source": np.array(DATA_SOURCES, dtype=object)},
    )
    raw = {k: v.clone() for k, v in batch.batch.items()}
    return left_right_2_no_padding(batch.to_tensordict()), raw


def response_log_probs(model, input_ids, attention_mask, position_ids) -> torch.Tensor:
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).logits
    log_probs = torch.log_softmax(logits[:, PROMPT - 1 : -1].float(), dim=-1)
    return torch.gather(log_probs, 2, input_ids[:, PROMPT:].unsqueeze(-1)).squeeze(-1)


def direct_task_gradients(model_dir, named_params, raw, indices, actor_config) -> dict[str, torch.Tensor]:
    """Single process, no verl: the PPO clipped objective (vanilla, with dual clip) of task k's tokens in the
    mini-batch, divided by the mini-batch's total token count -> one flat gradient per task."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    state = {name: tensor for name, tensor in named_params.items()}
    model.load_state_dict(state, strict=True)
    params = [p for _, p in sorted(model.named_parameters())]
    rows = {key: value[indices] for key, value in raw.items()}
    log_probs = response_log_probs(model, rows["input_ids"], rows["attention_mask"], rows["position_ids"])
    mask = rows["response_mask"].float()
    advantages, old = rows["advantages"], rows["old_log_probs"]
    ratio = torch.exp(torch.clamp(log_probs - old, -20.0, 20.0))
    low, high, dual = actor_config.clip_ratio_low, actor_config.clip_ratio_high, actor_config.clip_ratio_c
    clipped = torch.maximum(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - low, 1 + high))
    pg_losses = torch.where(advantages < 0, torch.minimum(-advantages * dual, clipped), clipped)
    total_tokens = mask.sum()
    tasks = [DATA_SOURCES[i].split("__")[0] for i in indices]
    grads = {}
    for task in sorted(set(tasks)):
        selector = torch.tensor([t == task for t in tasks], dtype=torch.float32).unsqueeze(1)
        loss = (pg_losses * mask * selector).sum() / total_tokens
        grads[task] = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params, retain_graph=True)])
    return grads


def verl_rank(rank: int, port: int, model_dir: str, actor_config, actor_rollout_ref: dict, result_dir: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(WORLD),
        LOCAL_RANK=str(rank),
        VERL_PLATFORM="rlaunch_test_cpu",
        VERL_ENGINE_DEVICE="cuda",  # selects verl's FSDP engine class; the device itself is our CPU platform
        RLAUNCH_PCGRAD_ENABLED="1",
        RLAUNCH_PCGRAD_TASK_KEY="data_source",
        RLAUNCH_PCGRAD_SEED=str(SEED),
    )
    torch.set_num_threads(1)
    register_cpu_platform()
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        run_verl_rank(rank, model_dir, actor_config, actor_rollout_ref, Path(result_dir))
    finally:
        dist.destroy_process_group()


def build_worker(worker_cls, model_dir: str, actor_config):
    """verl's TrainingWorker (or ours) as ActorRolloutRefWorker.init_model builds the actor: FSDP2, fp32 throughout
    so the comparison is exact, the actor's ppo_loss. Each optimizer step records the full parameters and gradients."""
    from functools import partial

    from verl.trainer.config import CheckpointConfig
    from verl.workers.config import FSDPEngineConfig, FSDPOptimizerConfig, HFModelConfig, TrainingWorkerConfig
    from verl.workers.utils.losses import ppo_loss

    worker = worker_cls(
        TrainingWorkerConfig(
            model_type="language_model",
            model_config=HFModelConfig(
                path=model_dir, override_config={"attn_implementation": "eager"}, enable_gradient_checkpointing=False
            ),
            engine_config=FSDPEngineConfig(
                strategy="fsdp2",
                mixed_precision={"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"},
                use_torch_compile=False,
            ),
            optimizer_config=FSDPOptimizerConfig(lr=LR, clip_grad=1e6, total_training_steps=10),
            checkpoint_config=CheckpointConfig(),
        )
    )
    worker.reset()
    worker.set_loss_fn(partial(ppo_loss, config=actor_config))
    worker.recorded = []
    verl_optimizer_step = worker.engine.optimizer_step

    def recording_optimizer_step() -> float:
        worker.recorded.append(full_params_and_grads(worker.engine.module))
        return verl_optimizer_step()

    worker.engine.optimizer_step = recording_optimizer_step
    return worker


def run_update(worker, data, rank: int, batching: dict) -> tuple[dict, list[tuple[list[int], dict, dict]]]:
    """One actor update as verl's trainer sends it: this rank's contiguous chunk, 2 mini-batches; returns verl's
    aggregated metrics and, per optimizer step, the global mini-batch's sample indices and the recorded state."""
    from verl.utils import tensordict_utils as tu

    per_rank = len(DATA_SOURCES) // WORLD
    chunk = tu.index_select_tensor_dict(data, list(range(rank * per_rank, (rank + 1) * per_rank)))
    tu.assign_non_tensor(
        chunk,
        global_batch_size=len(DATA_SOURCES) // MINI_BATCHES,
        mini_batch_size=len(DATA_SOURCES) // MINI_BATCHES,
        epochs=1,
        seed=SEED,
        dataloader_kwargs={"shuffle": False},
        temperature=1.0,
        calculate_entropy=False,
        compute_loss=True,
        **batching,
    )
    first = len(worker.recorded)
    output = worker.train_mini_batch(chunk)
    assert len(worker.recorded) - first == MINI_BATCHES, "one optimizer step per mini-batch"
    per_mini = per_rank // MINI_BATCHES
    steps = []
    for mini in range(MINI_BATCHES):  # verl's mini-batch `mini` is the same slice of every rank's chunk
        indices = [r * per_rank + mini * per_mini + i for r in range(WORLD) for i in range(per_mini)]
        steps.append((indices, *worker.recorded[first + mini]))
    return output, steps


def check_self_report(rank: int, pcgrad_actor, stock_actor, actor_rollout_ref: dict) -> None:
    """The start-up check's source: the hybrid worker the trainer maps the actor role to reports PCGrad active with
    our actor, and inactive with verl's stock one (as a worker whose plugin failed would)."""
    from omegaconf import OmegaConf

    from algos.verl_pcgrad import PcgradActorRolloutRefWorker, check_worker_status

    hybrid = PcgradActorRolloutRefWorker(config=OmegaConf.create(actor_rollout_ref), role="actor")
    hybrid.actor = pcgrad_actor
    status = hybrid.pcgrad_status()
    assert status["active"] and status["rank"] == rank and status["seed"] == SEED, status
    check_worker_status([status])
    hybrid.actor = stock_actor
    with pytest.raises(RuntimeError, match="PCGrad is NOT active"):
        check_worker_status([hybrid.pcgrad_status()])


def run_verl_rank(rank: int, model_dir: str, actor_config, actor_rollout_ref: dict, result_dir: Path) -> None:
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine_workers import TrainingWorker

    from algos.pcgrad import pcgrad, pcgrad_from_gram, random_order
    from algos.verl_pcgrad import PcgradTrainingWorker

    data, raw = make_batch(model_dir)
    stock = build_worker(TrainingWorker, model_dir, actor_config)
    _, baseline_steps = run_update(stock, data, rank, {"use_dynamic_bsz": False, "micro_batch_size_per_gpu": 2})

    worker = build_worker(PcgradTrainingWorker, model_dir, actor_config)
    assert worker.engine.train_batch is worker.pcgrad_step
    check_self_report(rank, worker, stock, actor_rollout_ref)
    decisions = []
    pcgrad_step = worker.pcgrad_step

    def recording_step(batch, loss_function):
        output = pcgrad_step(batch, loss_function)
        decisions.append(pcgrad_step.last)
        return output

    worker.engine.train_batch = recording_step
    runs = {
        "fixed": {"use_dynamic_bsz": False, "micro_batch_size_per_gpu": 2},
        # a token budget of two sequences: several micro-batches per task, count synced across ranks by verl
        "dynamic": {"use_dynamic_bsz": True, "max_token_len_per_gpu": 2 * (PROMPT + RESPONSE)},
    }
    steps = []
    for name, batching in runs.items():
        output, run_steps = run_update(worker, data, rank, batching)
        metrics = tu.get(output, "metrics")
        assert {"pcgrad/conflicts", "pcgrad/weight/math", "pcgrad/samples/math", "grad_norm"} <= metrics.keys()
        steps += [(name, *step) for step in run_steps]
    if rank != 0:
        return

    lines = []
    for step, (indices, params, grads) in enumerate(baseline_steps):
        task_grads = direct_task_gradients(model_dir, params, raw, indices, actor_config)
        plain = torch.stack([g.double() for g in task_grads.values()]).sum(0)
        got = torch.cat([grads[n].reshape(-1) for n in sorted(grads)]).double()
        error = float((got - plain).abs().max() / plain.abs().max())
        assert error < 1e-4, f"verl's own gradient is not the sum of the task gradients (step {step}): {error:.1e}"
        lines.append(f"baseline step {step}: sum of task gradients vs verl's gradient, max rel err {error:.1e}")

    for step, ((name, indices, params, grads), decision) in enumerate(zip(steps, decisions, strict=True)):
        task_grads = direct_task_gradients(model_dir, params, raw, indices, actor_config)
        tasks = sorted(task_grads)
        assert decision["tasks"] == tasks
        assert decision["counts"] == {t: sum(DATA_SOURCES[i].startswith(t) for i in indices) for t in tasks}
        stacked = torch.stack([task_grads[t].double() for t in tasks])
        order = random_order(len(tasks), torch.Generator().manual_seed(SEED * 1_000_003 + step))
        expected = pcgrad(list(stacked), order=order)
        got = torch.cat([grads[n].reshape(-1) for n in sorted(grads)]).double()
        error = float((got - expected).abs().max() / expected.abs().max())
        assert error < 1e-4, f"{name} step {step}: the optimizer's gradient is not PCGrad's ({error:.1e})"
        reference = pcgrad_from_gram(stacked @ stacked.T, order)
        torch.testing.assert_close(decision["result"].weights, reference.weights, rtol=1e-4, atol=1e-6)
        assert decision["result"].conflicts == reference.conflicts
        departure = float((expected - stacked.sum(0)).norm() / stacked.sum(0).norm())
        lines.append(
            f"{name} step {step} tasks {tasks}: max rel err {error:.1e}; conflicts {reference.conflicts}; "
            f"PCGrad departs from the plain sum by {departure:.1%}"
        )
        assert reference.conflicts == 0 or departure > 100 * error, "the data must make PCGrad visibly different"
    assert any(decision["result"].conflicts for decision in decisions), "the data must exercise a projection"
    (result_dir / "report.txt").write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_verl_micro_batching_into_the_pcgrad_step_equals_direct_pcgrad(tmp_path: Path):
    """verl's FSDP2 engine on 2 gloo ranks. (verl's FSDP1 engine cannot be built on CPU: it wraps with
    sync_module_states=True, which torch refuses for CPU modules; tests/test_pcgrad_sharded.py runs PCGrad's shard
    arithmetic on torch's FSDP1 flat parameters, with no_sync accumulation as verl uses it.)"""
    from conftest import compose_config
    from omegaconf import OmegaConf
    from tiny_assets import make_tiny_model
    from verl.utils.config import omega_conf_to_dataclass

    model_dir = make_tiny_model(tmp_path / "model")
    cfg = compose_config("algo=mtl_pcgrad", f"actor_rollout_ref.model.path={model_dir}")
    actor_config = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    actor_rollout_ref = OmegaConf.to_container(cfg.actor_rollout_ref, resolve=True)
    mp.spawn(
        verl_rank,
        args=(free_port(), str(model_dir), actor_config, actor_rollout_ref, str(tmp_path)),
        nprocs=WORLD,
        join=True,
    )
    print((tmp_path / "report.txt").read_text())
