"""Failure messages in the libraries' own words, made by the library where it is installed here (not copied from a
report): the Hub refusing a model id (through transformers and huggingface_hub, the Hub's answer served by an httpx
transport), datasets finding no data file, torch's rendezvous (its TCPStore) timing out, verl's own config checks,
torchrun reporting a rank killed by SIGKILL; vLLM, not installed here, by the wording of its source (its memory
profile's check). Each is classified by its kind and given a fix that names the value the message holds."""

from __future__ import annotations

import datetime
import socket
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from bench.failures import signature_kind
from launch.report import failures


def raised(call: Callable[[], object]) -> str:
    """The traceback `call` raises, as a log shows it."""
    try:
        call()
    except Exception:  # noqa: BLE001 - any exception is the message under test
        return traceback.format_exc()
    raise AssertionError("the call raised nothing")


@pytest.fixture
def hub_answers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[[int, str], None]]:
    """Make every Hub request get one answer (status, X-Error-Code), as huggingface.co gives it."""
    import huggingface_hub

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def answer(status: int, error_code: str) -> None:
        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(status, headers={"X-Error-Code": error_code}, request=request)

        huggingface_hub.set_client_factory(lambda: httpx.Client(transport=httpx.MockTransport(handler)))

    yield answer
    huggingface_hub.set_client_factory(httpx.Client)


def test_a_model_id_the_hub_does_not_have_is_a_model_the_nodes_cannot_load(hub_answers) -> None:
    from transformers import AutoConfig

    hub_answers(401, "RepoNotFound")
    log = raised(lambda: AutoConfig.from_pretrained("someorg/Qwen2.5-7B-Instrcut"))
    assert "is not a local folder and is not a valid model identifier" in log  # transformers' own words
    failure = failures.classify(log)
    assert failure.kind == signature_kind(log) == "model_not_cached"
    assert failure.details["model"] == "someorg/Qwen2.5-7B-Instrcut" and failure.details["hub"] == "not found"
    assert "check the id's spelling (actor_rollout_ref.model.path" in failure.fix
    assert "hf download someorg/Qwen2.5-7B-Instrcut" in failure.fix


def test_a_gated_model_says_to_request_access(hub_answers) -> None:
    from transformers import AutoConfig

    hub_answers(403, "GatedRepo")
    log = raised(lambda: AutoConfig.from_pretrained("meta-llama/Llama-3.1-8B-Instruct"))
    failure = failures.classify(log)
    assert failure.kind == "model_not_cached" and failure.details["hub"] == "gated"
    assert failure.fix.startswith("meta-llama/Llama-3.1-8B-Instruct is a gated repository")
    assert "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct" in failure.fix


def test_the_hubs_own_refusal_of_a_dataset_repository_is_no_model_problem(hub_answers) -> None:
    from huggingface_hub import hf_hub_download

    hub_answers(401, "RepoNotFound")
    log = raised(lambda: hf_hub_download("someorg/gsm8k-typo", "train.parquet", repo_type="dataset"))
    assert "Repository Not Found for url" in log and "/datasets/" in log
    assert failures.classify(log).kind != "model_not_cached"
    model_log = raised(lambda: hf_hub_download("someorg/model-typo", "config.json"))
    assert failures.classify(model_log).details["model"] == "someorg/model-typo"


@pytest.mark.parametrize("how", ["data_dir", "path"])
def test_a_directory_without_data_files_is_missing_data_naming_it(tmp_path: Path, how: str) -> None:
    import datasets

    empty = tmp_path / "gsm8k"
    empty.mkdir()  # the preprocessing that writes its parquet files never ran
    if how == "data_dir":
        log = raised(lambda: datasets.load_dataset("parquet", data_dir=str(empty)))
    else:
        log = raised(lambda: datasets.load_dataset(str(empty)))
    failure = failures.classify(log)
    assert failure.kind == signature_kind(log) == "data_missing", log[-400:]
    assert failure.details["data_path"] == str(empty)
    assert "data.train_files / data.val_files" in failure.fix


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_rendezvous_that_not_every_rank_reached_says_how_many_did() -> None:
    from torch.distributed import TCPStore

    timeout = datetime.timedelta(seconds=1)
    log = raised(lambda: TCPStore("127.0.0.1", free_port(), 4, True, timeout, wait_for_workers=True))
    failure = failures.classify(log)
    assert failure.kind == signature_kind(log) == "nccl_timeout"
    assert (failure.details["ranks_joined"], failure.details["world_size"]) == (1, 4)
    assert failure.fix.startswith("only 1 of 4 ranks reached torch's rendezvous")


def test_a_rank_that_never_reached_the_rendezvous_names_the_address() -> None:
    from torch.distributed import TCPStore

    port = free_port()  # nobody listens there
    log = raised(lambda: TCPStore("127.0.0.1", port, 2, False, datetime.timedelta(seconds=1)))
    failure = failures.classify(log)
    assert failure.kind == "nccl_timeout"
    assert failure.details["rendezvous"] == f"127.0.0.1:{port}"
    assert "127.0.0.1 is a loopback or docker-bridge address" in failure.fix
    assert "--node-ip-address" in failure.fix


def test_a_gloo_group_a_rank_never_joins_is_an_nccl_timeout_naming_that_rank() -> None:
    # torch itself: rank 0 of two forms a Gloo group over a store rank 1 never reaches; its wait for rank 1's key
    # times out (held-out-13's vllm-ascend-2248 and held-out-7's vllm-52907 print the same)
    import datetime

    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=1)
    store = dist.TCPStore("127.0.0.1", 0, 2, True, timeout=timeout, wait_for_workers=False)
    try:
        log = raised(lambda: dist.init_process_group("gloo", store=store, rank=0, world_size=2, timeout=timeout))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert "DistStoreError: wait timeout after 1000ms, keys:" in log
    failure = failures.classify(log)
    assert failure.kind == signature_kind(log) == "nccl_timeout"
    assert failure.details["rank_missing"] == 1 and failure.details["store_wait_s"] == 1
    assert failure.fix.startswith("a process group never formed: its store waited 1 s for the key of rank 1")
    # a store echoing a peer that crashed is no timeout: not read as one
    assert signature_kind("torch.distributed.DistStoreError: Connection reset by peer") == "unknown"


VERL_ACTOR = {
    "strategy": "fsdp",
    "rollout_n": 4,
    "ppo_mini_batch_size": 8,
    "ppo_micro_batch_size_per_gpu": 2,
    "use_dynamic_bsz": False,
}


def test_a_value_verls_own_config_check_refuses_is_a_config_error_quoting_it() -> None:
    from verl.workers.config import FSDPActorConfig

    log = raised(lambda: FSDPActorConfig(**VERL_ACTOR, loss_agg_mode="token-avg"))
    failure = failures.classify(log)
    assert failure.kind == signature_kind(log) == "config_error"
    assert failure.details["verl_check"] == "ValueError: Invalid loss_agg_mode: token-avg"
    assert failure.details["config_section"] == "actor_rollout_ref.actor"
    runtime = raised(lambda: FSDPActorConfig(**VERL_ACTOR).validate(n_gpus=8, train_batch_size=4))
    assert "train_batch_size (4) must be >= actor.ppo_mini_batch_size (8)" in failures.classify(runtime).fix


def test_verls_batch_check_names_the_keys_behind_its_quantities() -> None:
    # verl's own check (utils/config.py) speaks of real_train_batch_size and a minimal batch size, neither a key
    from omegaconf import OmegaConf
    from verl.utils.config import validate_config

    config = OmegaConf.create(
        {
            "trainer": {"n_gpus_per_node": 8, "nnodes": 3},
            "data": {"train_batch_size": 256},
            "actor_rollout_ref": {"actor": {"use_dynamic_bsz": False, "strategy": "fsdp"}, "rollout": {"n": 8}},
        }
    )
    log = raised(lambda: validate_config(config, use_reference_policy=False, use_critic=False))
    assert "real_train_batch_size (2048) must be divisible by minimal possible batch size (24)" in log
    failure = failures.classify(log)
    assert failure.kind == "config_error" and failure.details["config_key"] == "data.train_batch_size"
    assert "data.train_batch_size x actor_rollout_ref.rollout.n = 2048 samples per step do not split over 24" in (
        failure.fix
    )
    assert "(e.g. 2040 or 2064), or use a GPU count that divides 2048 (16 or 32)" in failure.fix


def test_vllms_step_budget_below_one_sequence_says_which_way_to_turn_each_knob() -> None:
    # vLLM's SchedulerConfig._verify_args (vllm/config/scheduler.py), its wording, with chunked prefill off
    log = (
        "(TaskRunner pid=311) pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig\n"
        "  Value error, max_num_batched_tokens (8192) is smaller than max_model_len (32768). This effectively limits "
        "the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please "
        "increase max_num_batched_tokens or decrease max_model_len. [type=value_error]\n"
    )
    failure = failures.classify(log)
    assert failure.kind == signature_kind(log) == "config_error"
    assert "raise actor_rollout_ref.rollout.max_num_batched_tokens to 32768 or more" in failure.fix
    assert "lower actor_rollout_ref.rollout.max_model_len to 8192" in failure.fix
    assert "actor_rollout_ref.rollout.enable_chunked_prefill=true" in failure.fix


def test_a_tokenizer_without_a_chat_template_points_at_verls_custom_chat_template(tmp_path: Path) -> None:
    from tiny_assets import make_tiny_tokenizer
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(make_tiny_tokenizer(tmp_path / "tok")))
    tokenizer.chat_template = None  # a base model's tokenizer
    log = raised(lambda: tokenizer.apply_chat_template([{"role": "user", "content": "1+1?"}], tokenize=False))
    failure = failures.classify(log)
    assert failure.kind == signature_kind(log) == "config_error"
    assert "set actor_rollout_ref.model.custom_chat_template to a Jinja chat template" in failure.fix


def test_an_extension_built_for_another_torch_stays_unknown_and_says_what_to_rebuild() -> None:
    # the dynamic loader's own wording (dlopen's error, as Python's ImportError carries it); out of the vocabulary
    log = (
        "(WorkerDict pid=3131, ip=10.0.0.9) ImportError: /env/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-"
        "310-x86_64-linux-gnu.so: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt"
        "11char_traitsIcESaIcEEE\n"
    )
    failure = failures.classify(log)
    assert failure.kind == "unknown"
    assert "flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so does not match the job's torch" in failure.fix
    assert "+actor_rollout_ref.model.override_config.attn_implementation=sdpa" in failure.fix


def test_verls_check_wrapped_by_hydras_instantiate_is_a_config_error_too() -> None:
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass

    config = OmegaConf.create(
        {"_target_": "verl.workers.config.FSDPActorConfig", **VERL_ACTOR, "loss_agg_mode": "token-avg"}
    )
    log = raised(lambda: omega_conf_to_dataclass(config))
    assert "InstantiationException: Error in call to target 'verl.workers.config" in log
    failure = failures.classify(log)
    assert failure.kind == "config_error" and "Invalid loss_agg_mode: token-avg" in failure.fix


def test_an_error_deeper_than_verls_check_is_not_its_refusal() -> None:
    # a config's __post_init__ that calls a library which then fails (verl's model config loads the HF config): the
    # deepest frame is the library's, so the check did not refuse anything
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/env/verl/workers/config/model.py", line 160, in __post_init__',
            "    self.hf_config = AutoConfig.from_pretrained(self.local_hf_model_path)",
            '  File "/env/transformers/configuration_utils.py", line 700, in get_config_dict',
            "    raise EnvironmentError(",
            "OSError: Incorrect hf_config: a socket error the library met",
        ]
    )
    assert signature_kind(log) != "config_error"


def torchrun_output_of_a_rank_killed_by_sigkill(tmp_path: Path) -> str:
    """torch's elastic agent (torchrun) reporting a rank that the kernel, SLURM or a user killed with SIGKILL."""
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text("import os, signal\nprint('step 1', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1", f"--master_port={free_port()}"]
    run = subprocess.run([*command, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    return run.stdout + run.stderr


def test_a_rank_killed_by_sigkill_says_what_decides_who_killed_it(tmp_path: Path) -> None:
    log = torchrun_output_of_a_rank_killed_by_sigkill(tmp_path)
    assert "Signal 9 (SIGKILL) received by PID" in log  # torch's own words
    failure = failures.classify(log)
    # nothing in the log says whether the OOM killer, SLURM's limit or a cancel sent it: unknown, narrowed
    assert failure.kind == "unknown" and failure.details["signal"] == "SIGKILL"
    assert "dmesg" in failure.fix and "MaxRSS" in failure.fix and "likeness" not in failure.details
    # where the kernel's own line is in the log too, it says who: the host's memory
    oom_killer = "Out of memory: Killed process 7607 (python) total-vm:91234567kB, anon-rss:81234567kB\n"
    assert failures.classify(oom_killer + log).kind == "host_oom"


@pytest.mark.parametrize(
    ("line", "before", "after"),
    [
        # vLLM V1 (GiB), and the older engine's bytes
        (
            "Error in memory profiling. Initial free memory 20.58 GiB, current free memory 22.54 GiB. This happens "
            "when other processes sharing the same container release GPU memory while vLLM is profiling during init.",
            20.58,
            22.54,
        ),
        (
            "Error in memory profiling. Initial free memory 39909924864, current free memory 47541829632. This happens "
            "when the GPU memory was not properly cleaned up before initializing the vLLM instance.",
            37.17,
            44.28,
        ),
    ],
)
def test_vllms_profile_disturbed_by_another_process_is_no_shortage(line: str, before: float, after: float) -> None:
    failure = failures.classify(f"(EngineCore_0 pid=4121) AssertionError: {line}")
    assert failure.kind == "engine_memory"
    assert (failure.details["free_before_gib"], failure.details["free_after_gib"]) == (before, after)
    assert "gpu_memory_utilization cannot help" in failure.fix and "--exclusive" in failure.fix


def refused_on_the_host(allocation: str) -> str:
    """What a process prints when the host refuses it an allocation: run under an address-space limit (the kernel
    answers ENOMEM as it does to a job at its cgroup's or node's end)."""
    import subprocess
    import sys

    code = (
        "import resource\nresource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        f"import torch, numpy\n{allocation}\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0, run.stdout
    return run.stderr


@pytest.mark.parametrize(
    ("allocation", "refused_gib"),
    [
        ("torch.empty(1 << 31, dtype=torch.float32)", 8.0),  # torch's CPU allocator: 8 GiB
        ("numpy.empty(1 << 30, dtype=numpy.float64)", 8.0),  # numpy's _ArrayMemoryError
        ("bytearray(4 << 30)", None),  # Python's own MemoryError
    ],
    ids=["torch", "numpy", "python"],
)
def test_a_host_allocation_refused_in_the_process_is_host_memory(allocation: str, refused_gib: float | None) -> None:
    log = refused_on_the_host(allocation)
    failure = failures.classify(log)
    assert failure.kind == signature_kind(log) == "host_oom", log[-300:]
    if refused_gib is not None:
        assert failure.details["refused_gib"] == refused_gib
        assert f"plus {refused_gib:.1f} GiB (--mem, rlaunch: cluster.mem_gb)" in failure.fix


@pytest.mark.parametrize(
    "line",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",  # the GPU's, by its own kind
        "ray.exceptions.OutOfMemoryError",  # Ray's bare class: which memory, its message would say
        "ValueError: MemoryErrorHandler is not configured",  # a name that merely contains it
    ],
)
def test_other_memory_errors_are_not_read_as_the_hosts(line: str) -> None:
    assert signature_kind(line) != "host_oom"


def test_ray_1s_memory_monitor_is_the_hosts_with_its_figures() -> None:
    # Ray 1.x raised it from the task that crossed its threshold (ray/memory_monitor.py, raise_if_low_memory)
    log = (
        '  File "/env/lib/python3.7/site-packages/ray/memory_monitor.py", line 140, in raise_if_low_memory\n'
        "    self.error_threshold))\n"
        "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node suwi is used (30.47 / 31.3 GB). "
        "The top 10 memory consumers are:"
    )
    failure = failures.classify(log)
    assert failure.kind == "host_oom"
    assert (failure.details["node_used_gb"], failure.details["node_total_gb"]) == (30.47, 31.3)
    assert "above 31.3 GB" in failure.fix


def test_torchs_own_out_of_memory_on_a_real_h200_is_cuda_oom_with_a_direction():
    """torch 2.11's message as it came from the lent H200 (tests/data/gpu_hang_h200/cuda_oom.log): one tensor larger
    than the card, so offloading cannot help and the fix says which way to turn the micro-batch."""
    log = Path(__file__).parent / "data" / "gpu_hang_h200" / "cuda_oom.log"
    failure = failures.classify(log.read_text())
    assert failure.kind == "cuda_oom"
    assert "139.8 GiB" in failure.fix and "halve actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" in failure.fix
