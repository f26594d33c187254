"""The families held-out-11's misses belong to (bench/results/failures.txt note 23), each with a look-alike that keeps
its kind. pydantic's message is made by pydantic itself; the others are quoted in their libraries' wording (vLLM,
torch_npu and LLaMA-Factory are not installed here; Ray's lines are its C++ core's)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from bench.failures import signature_kind
from launch.report import failures
from launch.report.failures.signatures import unwrap


class DataConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seq_len: int = 1024


class SFTTrainerConfig(BaseModel):
    data: DataConfig = DataConfig()
    max_steps: int = 10


class ChatMessage(BaseModel):
    role: str
    content: str


def validation_log(model: type[BaseModel], values: dict) -> str:
    try:
        model.model_validate(values)
    except ValidationError as error:
        return f"pydantic_core._pydantic_core.ValidationError: {error}"
    raise AssertionError("pydantic accepted it")


def test_a_config_class_pydantic_refuses_is_a_config_error_naming_its_fields():
    log = validation_log(SFTTrainerConfig, {"data": {"seq_len": "long"}, "max_steps": "many"})
    failure = failures.classify(log)
    assert failure.kind == signature_kind(log) == "config_error"
    assert failure.details["config_class"] == "SFTTrainerConfig"
    assert failure.details["config_fields"] == "data.seq_len,max_steps"
    assert failure.fix.startswith("SFTTrainerConfig refused 2 value(s) of the config it was given: data.seq_len, ")
    # the same exception about a record, not a config, names no config
    record = validation_log(ChatMessage, {"role": "user"})
    assert signature_kind(record) != "config_error"


def test_a_trainer_left_without_one_usable_sample_is_a_data_error():
    log = (
        '[rank0]:   File "/x/LLaMA-Factory/src/llamafactory/data/loader.py", line 271, in _get_preprocessed_dataset\n'
        '[rank0]:     raise RuntimeError("Cannot find valid samples, check `data/README.md` for the data format.")\n'
        "[rank0]: RuntimeError: Cannot find valid samples, check `data/README.md` for the data format."
    )
    assert failures.classify(log).kind == "data_error"


def test_ray_datas_datasource_frames_read_files_too():
    log = "\n".join(
        [
            "ray.exceptions.RayTaskError(FileNotFoundError): ray::_get_read_tasks() (pid=1220, ip=10.0.2.237)",
            '  | File "/env/ray/data/read_api.py", line 1868, in _get_read_tasks',
            '  | File "/env/ray/data/datasource/file_meta_provider.py", line 408, in _expand_paths',
        ]
    )
    assert failures.classify(log).kind == "data_missing"


@pytest.mark.parametrize(
    ("missing", "kind_is_data"),
    [("/data/gsm8k/train.json", True), ("meta-llama/Llama-3.2-3B/config.json", False)],
)
def test_a_models_own_json_is_no_missing_data(missing: str, kind_is_data: bool):
    log = f"FileNotFoundError: [Errno 2] No such file or directory: '{missing}'"
    assert (signature_kind(log) == "data_missing") == kind_is_data


VLLM_07_PROFILE = [
    "INFO 02-26 09:54:02 model_runner.py:1115] Loading model weights took 5.2032 GB",
    "INFO 02-26 09:54:05 worker.py:267] the current vLLM instance can use total_gpu_memory (8.00GiB) x "
    "gpu_memory_utilization (0.70) = 5.60GiB",
    "INFO 02-26 09:54:05 worker.py:267] model weights take 5.20GiB; non_torch_memory takes 0.03GiB; PyTorch "
    "activation peak memory takes 1.42GiB; the rest of the memory reserved for KV Cache is -1.05GiB.",
    "INFO 02-26 09:54:05 executor_base.py:111] # cuda blocks: 0, # CPU blocks: 4681",
]


def test_vllm_07s_profile_leaving_no_kv_cache_is_the_engines_with_the_fraction_that_fits():
    failure = failures.classify("\n".join(VLLM_07_PROFILE))
    assert failure.kind == "engine_memory"
    assert failure.details["kv_shortfall_gib"] == 1.05 and failure.details["gpu_memory_utilization"] == 0.7
    # 0.70 x 8 GiB plus the 1.05 GiB missing, and 2 % to spare: 0.86
    assert "gpu_memory_utilization=0.86 (now 0.7)" in failure.fix
    healthy = [line.replace("-1.05GiB", "2.31GiB").replace("blocks: 0,", "blocks: 1183,") for line in VLLM_07_PROFILE]
    assert signature_kind("\n".join(healthy)) == "unknown"


def test_hccls_collective_timeout_is_a_collective_timeout():
    log = (
        "[rank1]: RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: "
        "HcclAllreduce, error code is 6\n"
        "[rank1]: EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote Rank did "
        "not send the data in time. Please check the reason for the rank being stuck"
    )
    assert failures.classify(log).kind == "nccl_timeout"


HEARTBEAT = (
    "[rank6]:[E429 13:55:49.384372190 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 6] "
    "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
    "collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, and "
    "could be triggered by another thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), or other "
    "deadlock-prone behaviors."
)


def hard_wrapped(text: str, width: int) -> str:
    return "\n".join(text[start : start + width] for start in range(0, len(text), width))


@pytest.mark.parametrize("width", [72, 116])
def test_a_log_hard_wrapped_at_a_fixed_width_is_read_rejoined(width: int):
    wrapped = hard_wrapped(HEARTBEAT, width)
    assert signature_kind(wrapped) == "unknown"  # the signature is cut in two on its lines
    failure = failures.classify(wrapped)
    assert failure.kind == "nccl_timeout" and "likeness" not in failure.details


def test_unwrapping_leaves_a_log_without_a_repeated_width_as_it_is():
    lines = ["short line", "x" * 70, "y" * 90, "another short one"]
    assert unwrap(lines) == lines
    assert unwrap(["a" * 64, "b" * 64, "c" * 64, "end"]) == ["a" * 64 + "b" * 64 + "c" * 64 + "end"]


@pytest.mark.parametrize(
    ("path", "advice"),
    [
        ("/global/home/u1/raytemp/session_2020-10-04_12-37-38_811569_129114/sockets/raylet", "node-local --temp-dir"),
        ("/tmp/ray/session_2020-10-04_12-37-38_811569_129114/sockets/raylet", "read raylet.out"),
    ],
)
def test_a_raylet_socket_the_driver_cannot_reach_is_a_failed_start(path: str, advice: str):
    log = f"F1004 12:37:49.333159 129114 129114 raylet_client.cc:54] Could not connect to socket {path}"
    failure = failures.classify(log)
    assert failure.kind == "ray_start_failed" and failure.details["raylet_socket"] == path
    assert advice in failure.fix


def test_raylet_socket_retries_are_a_cause_only_where_the_log_ends_in_them():
    retry = (
        "E0911 01:21:34.567864 222608 222608 raylet_client.cc:69] Retrying to connect to socket for pathname "
        "/tmp/ray/session_2020-09-11_01-21-32_853982_222608/sockets/raylet (num_attempts = 1, num_retries = 10)"
    )
    assert failures.classify(retry).kind == "ray_start_failed"
    went_on = retry + "\nRuntimeError: the reward function raised for data_source=gsm8k"
    assert signature_kind(went_on) != "ray_start_failed"


def test_deepspeeds_launcher_reporting_a_sigkill_says_what_decides_who_sent_it():
    log = (
        "[2023-11-13 16:59:54,760] [INFO] [launch.py:314:sigkill_handler] Killing subprocess 9439\n"
        "[2023-11-13 16:59:55,650] [ERROR] [launch.py:320:sigkill_handler] ['/opt/conda/bin/python', '-u', "
        "'train.py', '--local_rank=1'] exits with return code = -9"
    )
    failure = failures.classify(log)
    assert failure.kind == "unknown" and failure.details["signal"] == "SIGKILL" and "dmesg" in failure.fix
