"""What tuning on held-out-4's misses added to the failure classifier (launch/report/failures/), each rule in its
general form rather than the excerpt's (bench/results/failures.txt, note 9): pandas' missing columns, a loader's "File
<path> not found", nvidia-smi that finds no GPU (only where nothing else explains the failure), the raylet's older
"Required resources" warning, huggingface_hub's offline mode with nothing cached, Python's call errors of a reward
function, and a log whose first line was cut inside a frame. Where a library is installed here, the message is made by
the library itself, so no rule can lean on the excerpt's own text. Then the fixes: each names the key, the direction
and the numbers held-out-4's logs hold, and what cannot help where the log shows it."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from bench.failures import CORPORA, excerpt_body
from launch.report import failures

HELD_OUT_4 = CORPORA["held-out-4"]


def held_out_4(kind: str, name: str) -> str:
    return excerpt_body(HELD_OUT_4 / kind / f"{name}.log")


def exception_line(error: BaseException) -> str:
    """The last line of a traceback, as Python prints the exception into a log."""
    return "".join(traceback.format_exception_only(type(error), error)).strip()


# --- pandas: columns the DataFrame does not have ----------------------------------------------------------------------


def test_pandas_missing_columns_are_a_data_error_in_pandas_own_wording():
    pandas = pytest.importorskip("pandas")
    with pytest.raises(KeyError) as raised:
        pandas.DataFrame({"prompt": ["1 + 1"]})[["question", "answer"]]
    failure = failures.classify(exception_line(raised.value))
    assert failure.kind == "data_error"
    assert failure.details["missing_columns"] == "question, answer"
    assert "no column 'question', 'answer'" in failure.fix and "data.prompt_key" in failure.fix
    assert failures.classify(held_out_4("data_error", "verl-600-sft-question-column")).kind == "data_error"


def test_a_long_list_of_missing_columns_wrapped_over_lines_still_names_them():
    log = (
        "KeyError: \"None of [Index(['question_body', 'question_title',\n"
        "       'answer'],\n"
        "      dtype='object')] are in the [columns]\""
    )
    failure = failures.classify(log)
    assert failure.kind == "data_error"
    assert failure.details["missing_columns"] == "question_body, question_title, answer"


def test_row_labels_and_a_bare_key_error_are_no_data_error():
    # pandas' [index] form is about row labels; a bare KeyError on a name could be any dict of any code
    rows = "KeyError: \"None of [Index(['2024-01-01'], dtype='object')] are in the [index]\""
    assert failures.classify(rows).kind == "unknown"
    assert failures.classify("KeyError: 'question'").kind == "unknown"


# --- a data file a loader says it did not find ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "path"),
    [
        ("ValueError: File /shared/data/gsm8k/train.parquet not found.", "/shared/data/gsm8k/train.parquet"),
        ("OSError: File 'data/val.jsonl' does not exist", "data/val.jsonl"),
        ('RuntimeError: File "corpus/train.csv" not found', "corpus/train.csv"),
    ],
)
def test_a_loaders_file_not_found_names_the_data_file(line: str, path: str):
    failure = failures.classify(line)
    assert failure.kind == "data_missing"
    assert failure.details["data_path"] == path
    relative = not path.startswith("/")
    assert ("is a relative path" in failure.fix) is relative


def test_a_model_or_tokenizer_file_not_found_is_no_missing_data():
    assert failures.classify("ValueError: File /models/Qwen2.5-7B/config.json not found.").kind == "unknown"
    assert failures.classify("ValueError: File /models/q/tokenizer_config.json not found.").kind == "unknown"


def test_the_missing_dataset_buried_under_other_ranks_is_named_not_the_source_lines_variable():
    failure = failures.classify(held_out_4("data_missing", "llamafactory-6191-mllm-dome-json"))
    assert failure.kind == "data_missing"
    # the traceback's source line, raise ValueError(f"File {local_path} not found."), only names a variable
    assert failure.details["data_path"] == "data/mllm_dome.json"
    assert "data/mllm_dome.json is a relative path" in failure.fix


# --- nvidia-smi that finds no GPU: a cause only where nothing else is -------------------------------------------------

NVIDIA_SMI = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
    "driver is installed and running."
)


@pytest.mark.parametrize(
    "log",
    [
        NVIDIA_SMI,
        "+ nvidia-smi\nNo devices were found",
        # the consequence a GPU-less job then prints (vLLM's device detection) is no cause of its own
        NVIDIA_SMI + "\nRuntimeError: Failed to infer device type",
    ],
)
def test_nvidia_smi_without_a_gpu_is_a_gpu_shortage(log: str):
    failure = failures.classify(log)
    assert failure.kind == "gpu_unavailable"
    assert "cluster.partition" in failure.fix and "+cluster.sbatch_extra.exclude=<node>" in failure.fix
    assert "no batch size or memory setting can help" in failure.fix


def test_nvidia_smi_never_outranks_a_cause_the_log_names_nor_a_gpu_at_work():
    later_data = NVIDIA_SMI + "\nFileNotFoundError: Unable to find '/data/gsm8k/train.parquet'"
    assert failures.classify(later_data).kind == "data_missing"
    earlier_reward = "Error in reward function: ZeroDivisionError\n" + NVIDIA_SMI
    assert failures.classify(earlier_reward).kind == "reward_error"
    # the job's own kernels ran on a GPU: nvidia-smi's failure was elsewhere (a login node, a prolog)
    at_work = NVIDIA_SMI + "\nRuntimeError: CUDA error: an illegal memory access was encountered"
    assert failures.classify(at_work).kind == "unknown"
    assert failures.classify("No devices were found in the config directory").kind == "unknown"


# --- the raylet's older warning for an actor it cannot place ----------------------------------------------------------

RAY_WARNING = (
    "WARNING worker.py:1245 -- The actor or task with ID ffff cannot be scheduled right now. You can ignore this "
    "message if this Ray cluster is expected to auto-scale.\n"
    "Required resources for this actor or task: {{{demand}}}\n"
    "Available resources on this node: {{16.000000/16.000000 CPU, 0.000000/8.000000 GPU, 1.000000/1.000000 "
    "node:10.0.0.7}}\n"
    "In total there are 0 pending tasks and 3 pending actors on this node."
)


def test_the_raylets_older_warning_for_a_gpu_actor_is_a_gpu_shortage():
    failure = failures.classify(RAY_WARNING.format(demand="CPU: 1.000000, GPU: 2.000000"))
    assert failure.kind == "gpu_unavailable"
    assert failure.details == {"gpus_requested": 2.0, "gpus_free": 0.0, "gpus_total": 8.0, "pending_actors": 3}
    assert failure.fix.startswith("a Ray actor asks for 2 GPU(s) and the node has 0 of 8 free (3 actors waiting)")
    assert "a lower gpu_memory_utilization cannot help" in failure.fix
    assert "ray list actors --filter state=ALIVE" in failure.fix
    excerpt = failures.classify(held_out_4("gpu_unavailable", "ray-21097-actor-needs-gpu"))
    assert excerpt.kind == "gpu_unavailable" and excerpt.details["gpus_total"] == 1.0


def test_the_same_warning_for_cpus_alone_is_no_gpu_shortage():
    assert failures.classify(RAY_WARNING.format(demand="CPU: 4.000000")).kind == "unknown"


# --- huggingface_hub offline with nothing cached ----------------------------------------------------------------------


@pytest.mark.parametrize("download", ["hf_hub_download", "snapshot_download"])
def test_the_hub_switched_off_with_nothing_cached_in_huggingface_hubs_own_words(download: str, tmp_path: Path):
    hub = pytest.importorskip("huggingface_hub")
    call = {
        "hf_hub_download": lambda: hub.hf_hub_download(
            "org/model", "config.json", cache_dir=tmp_path, local_files_only=True
        ),
        "snapshot_download": lambda: hub.snapshot_download("org/model", cache_dir=tmp_path, local_files_only=True),
    }[download]
    with pytest.raises(Exception) as raised:
        call()
    # as an application logs it: the message without the class name (which the older rules know)
    failure = failures.classify(f"ERROR [app.models] Cannot load the embedding model: {raised.value}")
    assert failure.kind == "model_not_cached"
    assert failure.details["hub_offline"] == "yes"
    assert "HF_HUB_OFFLINE=0 helps only where the nodes reach huggingface.co" in failure.fix


def test_the_snapshot_neither_reachable_nor_cached_in_either_case():
    line = "we cannot find the appropriate snapshot folder for the specified revision on the local disk."
    assert failures.classify(line).kind == "model_not_cached"
    assert failures.classify(held_out_4("model_not_cached", "open-webui-10950-offline-no-snapshot")).kind == (
        "model_not_cached"
    )


def test_a_model_the_log_names_is_the_one_to_download():
    fix = failures.classify(excerpt_body(CORPORA["tuning"] / "model_not_cached" / "rsprompter-78-connect-timeout.log"))
    assert "`hf download facebook/sam-vit-base`" in fix.fix


# --- a reward function called with arguments its signature does not take ----------------------------------------------


def accuracy_reward(completions: list[str], assistant: list[str]) -> list[float]:
    return [float(c == a) for c, a in zip(completions, assistant, strict=True)]


class Scorer:
    def compute_score(self, data_source: str, solution_str: str) -> float:
        return float(bool(data_source and solution_str))


def test_pythons_call_errors_of_a_reward_function_are_reward_errors():
    with pytest.raises(TypeError) as missing:
        accuracy_reward(["4"])  # type: ignore[call-arg]
    failure = failures.classify("[rank0]:     output = reward_func(\n[rank0]: " + exception_line(missing.value))
    assert failure.kind == "reward_error"
    assert failure.details["missing_argument"] == "assistant"
    assert "called without 'assistant'" in failure.fix and "add it to every sample of the data" in failure.fix
    with pytest.raises(TypeError) as unexpected:
        Scorer().compute_score(data_source="gsm8k", solution_str="4", extra_info={})  # type: ignore[call-arg]
    failure = failures.classify(exception_line(unexpected.value))
    assert failure.kind == "reward_error" and failure.details["reward_function"] == "Scorer.compute_score"
    assert "add extra_info=None (or **kwargs) to the function" in failure.fix
    excerpt = failures.classify(held_out_4("reward_error", "qwen-vl-finetune-234-accuracy-reward-arg"))
    assert excerpt.kind == "reward_error" and excerpt.details["reward_function"] == "accuracy_reward"


@pytest.mark.parametrize(
    "line",
    [
        "TypeError: RewardModel.forward() got an unexpected keyword argument 'position_ids'",  # a model, not a scorer
        "TypeError: forward() missing 1 required positional argument: 'input_ids'",
        "TypeError: unsupported operand type(s) for +: 'int' and 'str' in accuracy_reward",
    ],
)
def test_call_errors_of_other_functions_are_no_reward_errors(line: str):
    assert failures.classify(line).kind == "unknown"


# --- a log whose first line was cut inside a frame --------------------------------------------------------------------


@pytest.mark.parametrize(
    "first",
    [
        '"python3.10/site-packages/math_verify/utils.py", line 43, in handler',
        'site-packages/math_verify/utils.py", line 43, in handler',  # cut inside the path: its quote is gone too
    ],
)
def test_a_first_line_cut_inside_a_frame_still_counts_as_one(first: str):
    log = f'{first}\n    raise TimeoutError("Operation timed out!")\nTimeoutError: Operation timed out!'
    failure = failures.classify(log)
    assert failure.kind == "reward_error"
    assert "math-verify's own timeout fired" in failure.fix and "catch TimeoutError in the scorer" in failure.fix
    assert failures.classify(held_out_4("reward_error", "simple-grpo-13-math-verify-timeout")).kind == "reward_error"


def test_only_a_logs_first_line_can_be_a_cut_frame():
    # a line that merely quotes a path with a line number, in the middle of a log, is no frame
    log = (
        "step 120 done\n"
        '"python3.10/site-packages/math_verify/utils.py", line 43, in handler\n'
        "TimeoutError: Operation timed out!"
    )
    assert failures.classify(log).kind == "unknown"


# --- fixes that name what held-out-4's logs hold ----------------------------------------------------------------------


def test_a_value_that_must_be_a_multiple_gets_the_multiples_and_divisors_next_to_it():
    fix = failures.classify(held_out_4("config_error", "robots-988-rollout-steps-divisible")).fix
    assert fix.startswith("rollout_steps=250 is not a multiple of num_mini_batches=4: set rollout_steps to 248 or 252")
    assert "or num_mini_batches to a divisor of 250 (2 or 5)" in fix
    verl = failures.classify(
        "AssertionError: train_batch_size (100) must be divisible by ppo_mini_batch_size (16)"
    ).details
    assert verl == {"config_key": "train_batch_size", "value": 100, "divisor": 16}
    # verl's own quantities, not keys: the keys behind them (train_batch_size x rollout.n over the GPUs)
    phrase = failures.classify(
        "AssertionError: real_train_batch_size (500) must be divisible by minimal possible batch size (48)"
    )
    assert phrase.details["config_key"] == "data.train_batch_size"
    assert "set data.train_batch_size so that the product is a multiple of 48 (e.g. 480 or 528)" in phrase.fix


def test_vllms_one_request_that_does_not_fit_says_fewer_sequences_cannot_help():
    old = failures.classify(held_out_4("engine_memory", "qwen3-295-kv-cache-7344"))
    assert "lower max_model_len to 7344 (now 32768)" in old.fix
    assert "lowering max_num_seqs cannot help" in old.fix
    new = failures.classify(held_out_4("engine_memory", "kaito-2132-max-model-len-estimate")).fix
    assert "lower max_model_len to 810208 (now 1048576)" in new and "lowering max_num_seqs cannot help" in new
    # the cache blocks' message is about all sequences at once: fewer of them does help there
    blocks = failures.classify("ValueError: No available memory for the cache blocks. Try increasing ...").fix
    assert "lower max_num_seqs" in blocks and "cannot help" not in blocks


def test_slurms_cgroup_kill_names_the_jobs_limit_and_the_sacct_that_shows_its_peak():
    failure = failures.classify(held_out_4("host_oom", "exonerate-31-cgroup-oom-kill"))
    assert failure.fix.startswith(
        "SLURM's cgroup killed a process of job 16198179 (step batch) at the job's own memory limit, not the node's RAM"
    )
    assert "`sacct -j 16198179 --format=MaxRSS,ReqMem`" in failure.fix and "cluster.mem_gb" in failure.fix
    older = failures.classify("slurmstepd: error: Detected 2 oom-kill event(s) in step 4242.0 cgroup.")
    assert older.details["slurm_job"] == "4242" and older.details["oom_kill_events"] == 2


def test_arrows_mixed_types_name_the_column_in_pyarrows_own_words(tmp_path: Path):
    pyarrow_json = pytest.importorskip("pyarrow.json")
    data = tmp_path / "train.jsonl"
    data.write_text('{"answer": 4}\n{"answer": "four"}\n')
    with pytest.raises(Exception) as raised:
        pyarrow_json.read_json(data)
    failure = failures.classify(exception_line(raised.value))
    assert failure.kind == "data_error" and failure.details["column"] == "/answer"
    assert "holds numbers in some rows and strings in others" in failure.fix
    assert "no setting of the loader or of verl reads mixed types" in failure.fix
    excerpt = failures.classify(held_out_4("data_error", "datasets-6460-jsonl-mixed-types"))
    assert excerpt.details["column"] == "/ner/[]/[]/[]"


def test_a_missing_verl_column_points_at_the_key_that_names_it_where_there_is_one():
    assert "point data.prompt_key at the column" in failures.classify("KeyError: 'prompt'").fix
    # verl 0.9.1's reward managers read data_source by name (data.reward_fn_key is only its legacy managers')
    assert "point data." not in failures.classify("KeyError: 'data_source'").fix
    assert "point data." not in failures.classify("KeyError: 'reward_model'").fix


def test_a_data_file_the_log_names_is_the_one_to_create_or_point_at():
    fix = failures.classify(held_out_4("data_missing", "finegrainedrlhf-3-rm-train-json")).fix
    assert fix.startswith("the data file /home/ec2-user/FineGrainedRLHF/./tasks/qa_feedback/data/F-ERR_sentence/")
    assert "data.train_files / data.val_files" in fix and "relative path" not in fix
    # a quote the log lost at the end of the path
    cut = failures.classify("FileNotFoundError: Unable to find 'data/AIME/test.parquet")
    assert cut.details["data_path"] == "data/AIME/test.parquet"
