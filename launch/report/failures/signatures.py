"""The failure kinds and how a log shows them: the vocabulary (`KINDS`, the order they are tried in), the regex
signatures of each kind, the node and phase names a line can carry, and `Failure`, one attempt's cause as the rest
of launch/report/failures/ and its readers pass it around (its one-line and terminal forms included).

Runs on: any machine that sees the run directories (login node, laptop with the shared filesystem); pure data and
text matching, no files read.

The signatures were taken from real reports (tests/data/failures/, one directory per kind, each excerpt with its
source) and from runs on the dev cluster.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

# Tried in this order: an interruption explains whatever errors the kill caused; memory and missing inputs explain
# the collective timeouts and dead actors that follow them; `unknown` is what is left.
KINDS = (
    "preempted",
    "time_limit",
    "host_oom",
    "disk_full",
    "engine_memory",
    "cuda_oom",
    "gpu_unavailable",
    "model_not_cached",
    "data_missing",
    "data_error",
    "ray_start_failed",
    "reward_error",
    "config_error",
    "ray_node_lost",
    "nccl_timeout",
    "unknown",
)
# Kinds no public log's line shows: a record says them: the hang watchdog's in the run directory
# (launch.rundir.HANG_FILE), which rlaunch's own job log repeats (RLAUNCH_HANG); the scheduler's for a cancel (SLURM's
# bare cancel line in the log is a scancel, a preemption under PreemptMode=CANCEL or the batch script's end alike:
# sacct's 'CANCELLED by <uid>' decides), or the stop line a Ray job's entrypoint writes
RECORDED_KINDS = ("hang", "cancelled")
# rlaunch's hang watchdog in the job's log: its stop (launch/watchdog.py record_hang), then the job's end on it
# (launch/job.py end_hung_attempt: requeued once, or the RuntimeError that fails the job). It names the cause itself,
# so it comes before every signature: what follows it in the log (the kill, a requeue signal) is its consequence.
RLAUNCH_HANG_STOP = re.compile(
    r"rlaunch: hang watchdog: no step for (?P<waited>\d+) s \(window (?P<window>\d+) s(?:, last step (?P<step>\d+))?\)"
)
RLAUNCH_HANG_END = re.compile(
    r"\bhang: no step for (?P<waited>\d+) s \(window (?P<window>\d+) s\) in (?P<phase>.+?): (?P<evidence>.*?) "
    r"\(stacks in (?P<stacks>[^)]*)\); (?P<requeue>requeued once\b|not requeued: (?P<why>.*?)(?: \(run \w+\))?$)"
)


def slurm_state(*states: str) -> tuple[str, ...]:
    """SLURM's final job state as the tools that report it print it: Snakemake's SLURM executor ("SLURM status is:
    'TIMEOUT'"), submitit's UncompletedJobError ("(state: TIMEOUT)"), scontrol ("JobState=TIMEOUT"), seff ("State:
    TIMEOUT"), and a row of sacct's table (the state column, then the ExitCode column). The state alone says why SLURM
    ended the job; CANCELLED and FAILED name no cause, so they are never read."""
    names = "|".join(states)
    return (
        rf"(?:SLURM status is: |\(state: |\bJobState=|\bState: )'?(?:{names})(?!\w)",
        rf"^\s*\d+(?:_\d+)?(?:\.\w+)?\s.*\s(?:{names})\s+\d+:\d+\s*$",
    )


SOME = r"(?!0(?:\.0*)?\b)\d+(?:\.\d+)?"
SAVED_DATASET_INCOMPLETE = re.compile(
    r"Directory (?P<dir>\S+) is neither a `Dataset` directory nor a `DatasetDict` directory"
)  # a count above zero: a request of 0 GPUs is no GPU shortage

# the job script's own stop before any Python ran (launch/plan.py guarded_setup_line, launch/snapshot.py job_setup)
SCRIPT_STOPPED = r"rlaunch: error: (?:cluster\.setup\[\d+\] failed|the code snapshot \S+ is gone)"

# Library messages that name a kind (SIGNATURES below reads each by its .pattern) and give fixes.py the numbers its fix
# quotes (their named groups): one pattern per message.
# sbatch refusing the job's --time (above the partition's MaxTime) or its --mem (above every node's RealMemory):
# SLURM's ESLURM_INVALID_TIME_LIMIT and ESLURM_INVALID_TASK_MEMORY (src/common/slurm_errno.c)
SLURM_TIME_REFUSED = re.compile(r"Requested time limit is invalid \(missing or exceeds some limit\)")
SLURM_MEM_REFUSED = re.compile(r"Memory specification can not be satisfied")
# a prompt that fills the engine's context: verl's async rollout servers (vllm_async_server.py, async_sglang_server.py
# generate; verl 0.9.1 sets a null rollout max_model_len to the model's max_position_embeddings), and the engines' own
# refusals (vLLM's v1/engine/processor.py _validate_model_input, SGLang's managers/tokenizer_manager.py)
PROMPT_FILLS_CONTEXT = (
    re.compile(
        r"Prompt length \((?P<prompt>\d+)\) (?:leaves no room to generate within|exceeds) the model's maximum "
        r"context length \((?P<context>\d+)\)"
    ),
    re.compile(
        r"The decoder prompt \(length (?P<prompt>\d+)\) is longer than the maximum model length of (?P<context>\d+)"
    ),
    re.compile(
        r"The input \((?P<prompt>\d+) tokens\) is longer than the model's context length \((?P<context>\d+) tokens\)"
    ),
)
# vLLM's device detection in the process that builds its engine (older DeviceConfig; since 0.6 its platform detection):
# no GPU visible there, as in a Ray actor created without one
VLLM_NO_DEVICE = re.compile(r"No supported device detected|Failed to infer device type")
# Arrow's reader on a file that is no parquet: without parquet's magic bytes (a Git LFS pointer never pulled, a download
# cut short, another format named .parquet)
PARQUET_NO_MAGIC = re.compile(r"Parquet magic bytes not found")
# the head address without its host (`--address=:6379`): the head node's IP never resolved, only its port is left
EMPTY_HEAD = re.compile(r"(?:--address[= ]|IP Head: |ip_head=)['\"]?(:\d+)\b")
# Hydra's pointer to its override grammar, which it prints under an override it could not parse
HYDRA_OVERRIDE_GRAMMAR = re.compile(r"hydra\.cc/docs/[\w.]+/advanced/override_grammar")
# hydra.utils.instantiate on a `_target_` it cannot import (hydra/_internal/instantiate/_instantiate2.py
# _resolve_target): its module or its class missing, or the module raising as it is imported. Its chained ImportError
# (hydra/_internal/utils.py _locate) puts what the import raised, as a repr, on the line after its own; the config key
# that holds the target follows as `full_key: ` where it is not the top level
HYDRA_TARGET_MISSING = re.compile(r"Error locating target '(?P<target>[^']+)'")
HYDRA_TARGET_LOAD = re.compile(r"Error loading '(?P<target>[^']+)':\s*$")
HYDRA_LOAD_CAUSE = re.compile(r"^(?P<error>\w+(?:Error|Exception))\((?P<message>.*)\)$")
HYDRA_FULL_KEY = re.compile(r"^full_key: (?P<key>\S+)\s*$", re.MULTILINE)
# Python unable to open the script it was given (`python /path/run.py`): the interpreter exits before any code runs;
# Python 3.11 names the script by its absolute path, older ones as given
SCRIPT_NOT_OPENED = re.compile(
    r"(?<!\S)(?P<python>\S*python[\d.]*): can't open file '(?P<path>[^']+)': "
    r"\[Errno (?P<errno>\d+)\] (?P<reason>.+?)\s*$"
)
# srun's --label (-l): each line of a task's output behind its task number, right-aligned to the widest (`0: `, ` 3: `,
# `12: `); an empty line keeps its bare label. srun's own lines and slurmstepd's carry none
SRUN_LABEL = re.compile(r"^\s*\d+:(?: |$)")
SLURM_OWN_LINE = re.compile(r"^(?:srun|slurmstepd(?:-[\w.-]+)?|sbatch|salloc): ")
# verl's DataProto.chunk (verl/protocol.py): a batch dispatched over a worker group whose size does not divide it
UNEQUAL_CHUNK = re.compile(r"only support equal chunk\. Got size of DataProto (?P<size>\d+) and chunk (?P<chunks>\d+)")
# verl mapping the actor's LoRA rank onto vLLM's max_lora_rank values (vllm_rollout/utils.py get_vllm_max_lora_rank)
LORA_RANK_REFUSED = re.compile(r"lora_rank must be less than or equal to (?P<most>\d+), but got (?P<rank>\d+)")
# verl's RLHFDataset reading a data path that is not a .parquet/.json/.jsonl file (a directory, a .csv):
# verl/utils/dataset/rl_dataset.py _read_files_and_tokenize
VERL_FORMAT_REFUSED = re.compile(r"ValueError: Unsupported file format: (?P<path>\S+)")
# torch's SIGBUS handler for a DataLoader worker (torch/csrc/DataLoader.cpp), and Ray's object store full with nothing
# it could spill (plasma_store_provider.cc): both live in /dev/shm, host memory with a size of its own
DATALOADER_SHM = re.compile(r"dataloader's workers are out of shared memory")
OBJECT_STORE_FULL = re.compile(r"\bObjectStoreFullError\b|in object store because it is full\. Object size is")
# SGLang's scheduler finding no KV-cache slots for a batch even after evicting its radix cache (mem_cache/common.py),
# and the tokens it tried to allocate, on the line after; its INFO "Decode out of memory happened" retracts requests
# and goes on, so it is no cause
SGLANG_NO_SLOTS = re.compile(
    r"(?P<stage>Prefill|Decode) out of memory\. Try to lower your batch size\.(?:\s*(?:\([^)]*\)\s*)?Try to "
    r"allocate (?P<tokens>\d+) tokens)?"
)
# GPUs there but not usable by the job: a card in exclusive-process mode that another process holds
# (cudaErrorDevicesUnavailable), two ranks of one communicator on one card (NCCL's init.cc), a --gres type the
# partition's nodes do not have (SLURM's ESLURM_INVALID_GRES)
GPU_HELD = re.compile(r"CUDA-capable device\(s\) is/are busy or unavailable|\bcudaErrorDevicesUnavailable\b")
DUPLICATE_GPU = re.compile(r"Duplicate GPU detected : rank (?P<first>\d+) and rank (?P<second>\d+) both on CUDA device")
GRES_REFUSED = re.compile(r"Invalid generic resource \(gres\) specification")
# NCCL's and Gloo's own network failures: NCCL's bootstrap finding no interface NCCL_SOCKET_IFNAME names
# (src/bootstrap.cc), its InfiniBand transport's work completion in error, with or without the peer (src/transport/
# net_ib.cc; status 12 is IBV_WC_RETRY_EXC_ERR), and Gloo's collective timeout (gloo/transport/tcp/unbound_buffer.cc)
NCCL_NO_INTERFACE = re.compile(r"Bootstrap ?: no socket interface found")
IB_COMPLETION_ERROR = re.compile(
    r"NET/IB ?: Got completion (?:from peer (?P<peer>\S+) )?with (?:status=|error )(?P<status>\d+)"
)
GLOO_TIMEOUT = re.compile(r"Timed out waiting (?P<ms>\d+) ?ms for (?P<op>recv|send) operation to complete")

# slurmstepd's line for a running job SLURM queues again: `scontrol requeue` (an admin's or the user's), and also
# submitit's own requeue after it caught its preemption or time-out signal, whose log says that first
SLURM_REQUEUED = re.compile(r"CANCELLED AT \S+ DUE TO JOB REQUEUE")

SIGNATURES: dict[str, tuple[str, ...]] = {
    "preempted": (
        r"DUE TO PREEMPTION",
        r"Caught signal \S+ on \S+: this job is preempted",  # submitit: USR2 by default, SIGHUP or USR1 where set
        *slurm_state("PREEMPTED"),
    ),
    "time_limit": (
        r"DUE TO TIME LIMIT",
        r"Caught signal \S+ on \S+: this job is timed-out",
        # submitit's refusal to requeue a timed-out job: no checkpoint method, or its max_num_timeout used up
        r"Job not requeued because: timed-out (?:and not checkpointable|too many times)",
        *slurm_state("TIMEOUT", "DEADLINE"),  # DEADLINE: the job's --deadline came before it ended
    ),
    "host_oom": (
        r"OutOfMemoryError: Task was killed due to the node running low on memory",
        # the same kill as an actor's or worker's exit detail (RayActorError, ActorDiedError, WorkerCrashedError)
        r"Worker exit detail: (?:Task was|Tasks? were|Worker was|Workers? were) killed due to the node running low on "
        r"memory",
        r"Workers \(tasks / actors\) killed due to memory pressure \(OOM\)",
        # Ray 1.x's memory monitor raising in the task that crossed its threshold
        r"RayOutOfMemoryError: More than [\d.]+% of the memory on node",
        r"Detected \d+ oom[-_]kill event",
        r"exceeded memory limit \(\d+ > \d+\), being killed|Exceeded (?:job|step) memory limit",
        r"oom-kill event\(s\)",
        # the kernel's OOM killer: its verdict (old kernels "Kill process", cgroups "Memory cgroup out of memory") and
        # the victim's sizes, a line only the OOM killer and its reaper print; platforms that relay it by name
        r"(?i:out of memory: Kill(?:ed)? process)",
        r"total-vm:\d+kB, anon-rss:\d+kB",
        r"\boom-kill:constraint=CONSTRAINT_\w+",  # the kernel's summary of an OOM kill (cgroup or node), cut or not
        r'(?i:killed by "?OOM[ -]?killer)',
        r"srun: error: \S+: tasks? [\d,-]+: Out Of Memory",  # SLURM's step summary after a cgroup OOM kill
        # Ray's memory monitor: the killed task's line, the raylet's summary and its pointer to the OOM docs
        r"Memory on the node \(\s*(?:IP|ID): [^)]*\) where the (?:task|actor)",  # Ray names the node by IP, or by ID
        r"System memory low at node with IP",
        r"ray-oom-prevention\.html",
        *slurm_state("OUT_OF_MEMORY", r"OUT_OF_ME\+"),  # sacct's default column cuts the state to 10 characters
        # a host allocation refused in the process itself (malloc's ENOMEM): torch's CPU allocator, numpy's, C++'s,
        # Python's own MemoryError (not the OutOfMemoryError classes, which the GPU and Ray kinds read)
        r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)",
        r"\b_ArrayMemoryError\b|Unable to allocate [\d.]+ [KMGTP]i?B for an array with shape",
        r"\bstd::bad_alloc\b",
        r"(?:^|[\s(:])MemoryError(?::|\s*$)",
        # the kernel refusing a process more memory (ENOMEM as Python's OSError: a fork, an mmap): NCCL's and verbs'
        # "Cannot allocate memory" of pinned memory (the memlock limit) never carries Python's errno form
        r"\[Errno 12\] Cannot allocate memory",
        DATALOADER_SHM.pattern,
        OBJECT_STORE_FULL.pattern,
    ),
    # a write that found its filesystem full or its quota used: before the collective timeouts and dead actors of the
    # ranks that waited for the one whose save failed
    "disk_full": (
        r"No space left on device|\[Errno 28\]",
        r"Disk quota exceeded|\[Errno 122\]",
        # torch.save: its zip writer names no errno. Older torch says the write failed; torch 2.13 (measured, a save
        # into a full tmpfs) raises the C++ stream's own error, then the end-of-file position it could not reach
        r"PytorchStreamWriter failed writing file \S+: file write failed",
        r"\bunexpected pos \d+ vs \d+",
        r"basic_ios::clear: iostream error",
        r"\bOutOfDiskError\b",  # Ray: an object store spill or a worker's file that found the local disk full
        # Ray's file system monitor (src/ray/common/file_system_monitor.cc) on its session or spilling directory:
        # `<path> is over 95% full, available space: 2.03 GB; capacity: 69.9 GB. Object creation will fail if
        # spilling is required.`, or `<path> has no capacity, object creation will fail if spilling is required.`
        r"\bis over [\d.]+% full, available space: .*Object creation will fail if spilling is required",
        r"\bhas no capacity, object creation will fail if spilling is required",
        # datasets' own check of its cache directory's free space before it prepares a dataset (builder.py)
        r"Not enough disk space\. Needed: ",
    ),
    "engine_memory": (
        r"No available memory for the cache blocks",
        r"Not enough memory\. Please try to (?:increase|decrease) --mem-fraction-static",
        r"Free memory on device .* is less than desired GPU memory utilization",
        # vLLM's profile of the card's free memory changed under it: another process on the same GPU (a colocated
        # trainer, another job) allocated or released memory while the engine measured its share
        r"Error in memory profiling\. Initial free memory",
        r"larger than the maximum number of tokens that can be stored in KV cache",
        r"(?i:cuda error: out of memory at \S*cumem_allocator)",  # vLLM's sleep-mode allocator (wake_up)
        r"KV cache is needed, which is larger than the available KV cache memory",
        # vLLM's worker reporting what is left for the KV cache after weights and activations: nothing
        r"Available KV cache memory: -[\d.]+ [GM]iB",
        # vLLM-Ascend's worker finding nothing left after the weights (in bytes)
        r"\bAvailable memory: (?:0|-\d+), total memory: \d+",
        # vLLM 0.7's worker summary of the same profile, and the executor's count of KV-cache blocks it leaves
        r"the rest of the memory reserved for KV Cache is -[\d.]+ ?[GM]iB",
        r"# (?:cuda|GPU) blocks: 0\b",
        # vLLM V1's KV-cache check by its message's start, which a log cut or wrapped at the terminal's width keeps
        # (some versions spell it "models's")
        r"To serve at least one request with the models?'s? max seq len \(\d+\)",
        # SGLang's memory profile: no token (or fewer than none) left for the KV cache after the weights; it raises
        # "Not enough memory" right after, which a cut log may not show
        r"is larger than the profiled value (?:-\d+|0)\b|\bmax_total_num_tokens=-\d+",
        # SGLang's memory saver (torch_memory_saver): CUresult / hipError 2 is CUDA_ERROR_OUT_OF_MEMORY
        r"\[torch_memory_saver\.cpp\] "
        r"(?:\w+ error\s+result=2\b|cuMemCreate CUDA_ERROR_OUT_OF_MEMORY|cudaError error: 2\b"
        r"|\w+ error: 2 \(out of memory\))",
        # vLLM's own warm-up of the sampler (or the pooler) at the engine's largest batch: its message names the
        # engine's knobs, max_num_seqs and gpu_memory_utilization, not the trainer's
        r"(?:CUDA )?out of memory occurred when warming up (?:the )?(?:sampler|pooler)\b",
        r"\((?:EngineCore\w*|RayWorkerWrapper|VllmWorker\S*) pid=\d+.*CUDA out of memory",
        r"Worker failed with error 'CUDA out of memory",
        SGLANG_NO_SLOTS.pattern,
        # SGLang capturing its CUDA graphs inside its memory share (cuda_graph_runner.py), out of memory there
        r"Capture cuda graph failed: .*out of memory",
    ),
    "cuda_oom": (
        # torch's own exception by its module (Ray's memory monitor raises a class of the same name: host_oom's rules
        # read its message, and a bare OutOfMemoryError stays unknown), and torch's message, CUDA's or ROCm's
        r"\btorch\.(?:cuda\.)?OutOfMemoryError\b",
        r"OutOfMemoryError: (?:CUDA|HIP) out of memory",
        r"(?:CUDA|HIP) out of memory\. Tried to allocate",
        r"(?:Error|Exception): (?:CUDA|HIP) out of memory\b",
        r"Tried to allocate [\d.]+ [KMGT]i?B\b[.;,]? \(?GPU\b",  # torch's sizes without its first words
        r"CUDA error: out of memory",  # RuntimeError before torch 2.8, torch.AcceleratorError since
        # the CUDA libraries' own allocations (cuBLAS's handle and workspace, cuDNN's, cuSOLVER's, cuSPARSE's, cuFFT's
        # plans) and the runtime's and driver's out-of-memory codes, by their names
        r"\bCU(?:BLAS|DNN|SOLVER|SPARSE)_STATUS_ALLOC_FAILED\b|\bCUFFT_ALLOC_FAILED\b",
        r"\bcudaErrorMemoryAllocation\b|\bCUDA_ERROR_OUT_OF_MEMORY\b",
        # NCCL's buffers: its CUDA call that failed, and its allocation wrapper
        r"Cuda failure (?:\d+ )?'out of memory'|Failed to CUDA calloc",
        r"RESOURCE_EXHAUSTED: Out of memory (?:while trying to allocate|allocating)",  # XLA (JAX) on the GPU
    ),
    "gpu_unavailable": (
        r"Total available GPUs \S+ is less than total desired GPUs \S+",
        r"No CUDA GPUs are available",
        # vLLM's Ray executor: tensor x pipeline parallel size is more than the cluster (or its placement group) has
        r"The number of required GPUs exceeds the total number of available GPUs",
        r"ProcessGroupNCCL is only supported with GPUs, no GPUs found",  # torch: NCCL asked for where no GPU is seen
        r"CUDA error: invalid device ordinal",  # a rank picked a GPU index past those it can see
        r"Found no NVIDIA driver on your system",
        VLLM_NO_DEVICE.pattern,
        r"CUDA driver initialization failed|cudaErrorNoDevice|no CUDA-capable device is detected",
        # Ray's scheduler: a request for GPUs no node of the cluster can give (it waits forever, or says infeasible)
        r"No available node types can fulfill resource request .*'GPU'",
        r"is infeasible and cannot currently be executed\. It requires .*GPU",
        r"cannot be scheduled right now\. It requires .*GPU|resource request cannot be scheduled right now: .*'GPU'",
        # the raylet's older form of the same warning puts the demand on a line of its own
        r"Required resources for this actor or task: \{[^}]*\bGPU\b",
        # vLLM's Ray executor gave up waiting for the placement group of its GPU workers (PG_WAIT_TIMEOUT)
        r"Cannot provide a placement group (?:of|requiring) .*GPU",
        # a trainer's own count of the GPUs it asked for against those the cluster has (NeMo-RL's "Not enough GPUs
        # available. Requested 16 GPUs, but only 8 ...", Ray Tune's "trial requested 1 CPUs, 1 GPUs, but the cluster
        # has only ...", "requires at least 2 GPUs, found 1"), and Ray Train's worker group
        r"(?i:\bnot enough (?:available )?GPUs\b|\binsufficient (?:number of )?GPUs\b)",
        rf"(?i:\brequest(?:ed|s|ing)\b[^\n]{{0,40}}?\b{SOME} GPUs?\b[^\n]{{0,40}}?\bbut\b[^\n]{{0,40}}?\bonly\b)",
        rf"(?i:\brequires? (?:at least |a minimum of )?{SOME} GPUs?\b[^\n]{{0,40}}?\b(?:but|only|found|got)\b)",
        r"requires \{['\"]GPU['\"]: [\d.]+\} but the cluster only has",
        r"[\d.]+ gpu per trial, but the cluster only has [\d.]+ cpu and [\d.]+ gpu",
        # vLLM's Ray executor when the node it runs on got no GPU of the placement group
        r"Ray does not allocate any GPUs on the driver node",
        # a device index past those the process sees: torch's assert, the runtime's and the driver's codes
        r"device >= 0 && device < num_gpus INTERNAL ASSERT FAILED",
        r"\bcudaErrorInvalidDevice\b|\bCUDA_ERROR_(?:INVALID_DEVICE|NO_DEVICE)\b",
        # torch's count of the devices failing in the CUDA driver (c10/cuda/CUDAFunctions.cpp): 802 an NVSwitch node
        # whose fabric manager is down, 803/804 a driver the CUDA runtime cannot use; error 2 (out of memory) is not
        # the GPU missing
        r"Unexpected error from cudaGetDeviceCount\(\)\..*? Error (?!2:)\d+:",
        GPU_HELD.pattern,
        DUPLICATE_GPU.pattern,
        GRES_REFUSED.pattern,
    ),
    "model_not_cached": (
        r"We couldn't connect to '?https://huggingface\.co'? to load",
        r"LocalEntryNotFoundError",
        r"OfflineModeIsEnabled",
        r"is not the path to a directory containing a file named config\.json",
        r"Incorrect path_or_model_id",
        # a model path that is no directory on this node, which transformers then hands to the Hub as a repo id
        r"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '(?:/|~|\./|\.\./)",
        # the Hub unreachable and the file not cached: huggingface_hub's wording, and transformers' before it used that
        r"cannot find the requested files in the (?:cached path|local cache)",
        # huggingface_hub offline (HF_HUB_OFFLINE, local_files_only) with nothing cached: its file and snapshot
        # downloads both say so; and a snapshot neither on the Hub's reach nor on disk
        r"and outgoing traffic has been disabled",
        r"(?i:cannot find (?:an|the) appropriate (?:cached )?snapshot folder for the specified revision on the local "
        r"disk)",
        # the Hub has no model by that id that this job may read (a typo, a private or gated repository without a
        # token): huggingface_hub's errors, and transformers' rewording of them; a dataset repository's is data_missing
        r"is not a local folder and is not a valid model identifier",
        # transformers failing to resolve a model's part (no cached file, no Hub): its message for each loader
        r"Can't load (?:tokenizer|feature extractor|image processor|processor) for '[^']+'",
        r"Can't load the configuration of '[^']+'",
        r"You are trying to access a gated repo|Cannot access gated repo for url|\bGatedRepoError\b",
        r"Repository Not Found for url: (?!\S*/datasets/)",
        r"Revision Not Found for url: (?!\S*/datasets/)",  # the Hub has the model, not the revision asked for
        # transformers finding a model directory (or a snapshot) without the file it needs: no weights, no config
        r"Error no file named \S+.* found in directory\b|\bdoes not appear to have a file named\b",
        # vLLM's model-path check: neither a Hub id nor a directory with a config it recognises
        r"Invalid repository ID or local directory specified: ",
        # urllib3's failure to reach the Hub by name (no DNS, no route, a timeout) where it names the Hub's host
        r"host='(?:[\w-]+\.)*(?:huggingface\.co|hf\.co)', port=\d+\): Max retries exceeded with url: (?!/datasets/)"
        r".*(?:NameResolutionError|NewConnectionError|ConnectTimeout|Network is unreachable|Name or service not known"
        r"|Temporary failure in name resolution)",
    ),
    "data_missing": (
        # a model's own json files (config, tokenizer, generation config, an index of shards) are no data
        r"FileNotFoundError: (?!.*(?:config|tokenizer\w*|index)\.json\b).*\.(?:parquet|jsonl?|arrow)\b",
        r"Unable to find '[^']+\.(?:parquet|jsonl?)'",
        r"No such file or directory.*\.parquet",
        # a loader's own "File <path> not found" (LlamaFactory's) for a data file; a model's config or tokenizer file
        # is no data
        r"\bFile ['\"]?(?![^'\"\s]*(?:config|tokenizer)[^'\"\s/]*\.json)[^'\"\s]+\.(?:parquet|jsonl?|arrow|csv)['\"]? "
        r"(?:not found|does not exist)",
        # datasets' load_dataset finding nothing at a local data path (or no loading script there)
        r"Couldn't find (?:any data file|a dataset script) at \S",
        # datasets asked for a dataset that is not there: an old version's loading script by URL, the Hub's answer,
        # a load_from_disk path that holds no saved dataset
        r"Couldn't find file at https?://\S+\.py\b",
        r"Dataset '[^']+' doesn't exist on the Hub|\bDatasetNotFoundError\b",
        # datasets given a directory (or a pattern) in which it finds no file it can read
        r"The directory at \S+ doesn't contain any data files|\bEmptyDatasetError\b",
        r"No \(supported\) data files (?:or dataset script )?found in\b|\bDataFilesNotFoundError\b",
        r"Repository Not Found for url: \S*/datasets/",  # the Hub's answer for a dataset repository
    ),
    "data_error": (
        r"ArrowInvalid",
        # verl's trainer: the data gives no full batch (fewer rows than data.train_batch_size after its filters)
        r"(?:Train|Validation) dataloader is empty",
        # LLaMA-Factory's preprocessing dropped every row as malformed (its own words)
        r"Cannot find valid samples, check `data/README\.md`",
        PARQUET_NO_MAGIC.pattern,
        r"DatasetGenerationError",
        r"ArrowTypeError|ArrowNotImplementedError|ArrowCapacityError",
        r"Couldn't deserialize thrift",  # a parquet file whose footer or page headers are corrupt (a cut copy)
        # datasets casting the files of one split to one schema: their columns differ (table.py, exceptions.py)
        r"\bDatasetGenerationCastError\b|\bCastError: Couldn't cast\b",
        VERL_FORMAT_REFUSED.pattern,
        r"KeyError: '(?:prompt|data_source|reward_model|ground_truth|extra_info)'",
        # pandas: none of the columns asked for is in the DataFrame ("None of [Index([...])] are in the [columns]"; its
        # [index] form is about row labels)
        r"\] are in the \[columns\]",  # the end of it, where a long list of columns wrapped the line
        # a directory that load_from_disk finds without a saved dataset's state or info file (a save that did not
        # finish, or the wrong level of the tree): datasets >= 2.x says so (SAVED_DATASET_INCOMPLETE), older versions
        # fail opening the file (the path may be wrapped onto a line of its own)
        SAVED_DATASET_INCOMPLETE.pattern,
        r"\bDATASET_(?:STATE_JSON|INFO|DICT_JSON)_FILENAME\b",
        r"/datasets/\S*/(?:state|dataset_info|dataset_dict)\.json'?\s*$",
    ),
    "ray_start_failed": (
        r"ray start failed on node",
        r"Ray did not come up",
        r"Ray node\(s\) .* did not register",
        r"the Ray head on \S+ .*did not come up|the Ray head on \S+ exited with code",
        r"Could not find any running Ray instance",
        r"Failed to connect to GCS|Failed to send request to gcs",
        # `ray start --address` on a node that cannot reach the head: Ray >= 1.11 (GCS) and before it (Redis)
        r"Unable to connect to GCS at \S+",
        r"Unable to connect to Redis at \S+ after \d+ retries",
        # a node whose own daemons never registered: `ray start`'s wait for its plasma store / raylet (Ray's 30 s,
        # hard-coded), and the core worker that never found the GCS's address
        r"Timed out after \d+ seconds while waiting for node to startup",
        r"TimeoutError: Timed out while waiting for node to startup",  # Ray 1's wording, without the seconds
        r"The current node timed out during startup",
        r"No entry found for GcsServerAddress|Check failed: .*gcs_service_connect_retries",
        r"Token authentication is enabled but no authentication token was found",
        # a core worker (the driver's ray.init, a worker) that cannot reach its node's raylet socket: the raylet never
        # came up, or its socket sits where a Unix socket cannot live (a shared filesystem); Ray's fatal line
        r"Could not connect to socket \S*/sockets/raylet",
        r"Couldn't reconnect to GCS server",
        r"Ray processes died unexpectedly",  # `ray start` itself: a daemon exited while the node came up
        r"Some Ray subprocesses exited unexpectedly",  # the same in Ray 2's words, the process and its code follow
        # the dashboard agent's own fatal line (the raylet fate-shares with it)
        r"Agent is working abnormally\. It will exit immediately",
        # the head's GCS that never came up (its error file's last lines follow), and the external Redis it could not
        # reach (RAY_REDIS_ADDRESS, GCS fault tolerance): the gcs_server's own retry lines
        r"Failed to start GCS\b",
        r"Failed to connect to Redis due to: |Could not establish connection to Redis \S+",
        # a port another process holds when a node starts: the GCS's or raylet's gRPC server, a running Ray at the
        # same address, two components given one port
        r"Failed to start the grpc server\. The specified port is \d+",
        # gRPC's own words when a Ray daemon's server cannot bind its port (its JSON error, wrapped or not)
        r"Failed to add any wildcard listeners|\bNo address added out of total \d+ resolved",
        r"Ray is trying to start at \S+, but is already running at",
        # a process whose Ray (or Python) differs from the cluster's (ray/_private/utils.py check_version_info), and
        # a Ray client (ray://) that no client server answered
        r"Error: Version mismatch: The cluster was started with",
        r"ConnectionError: ray client connection timeout",
        r"Ray component \w+ is trying to use a port number \d+ that is used by other components",
        # the dashboard Ray was told to start (include_dashboard=True) raised; its logged error alone is not fatal
        r"(?:Exception|Error): Failed to start (?:a|the) dashboard",
        EMPTY_HEAD.pattern,
        # Ray's SLURM template echoes the node it starts each Ray on ("Starting HEAD at $head_node", "Starting WORKER
        # $i at $node_i"): nothing after "at" is a node name that came out empty, so no Ray runs where it should
        r"(?i:^\s*starting (?:head|worker \d+) at\s*$)",
    ),
    "reward_error": (
        r"Reward function is not implemented for data_source",
        r"Error in (?:custom )?reward",
        # Python's call errors of a reward function (TRL's accuracy_reward, verl's compute_score): called with
        # arguments its signature does not take; a reward model's forward is no reward function
        r"TypeError: (?![\w.]*(?i:model))[\w.]*(?i:reward|compute_score)[\w.]*\(\) "
        r"(?:missing \d+ required|got an unexpected keyword argument|got multiple values for argument|takes \d+)",
    ),
    "config_error": (
        SCRIPT_STOPPED,
        r"omegaconf\.errors\.\w+",
        r"ConfigAttributeError|ConfigKeyError|MissingMandatoryValue",
        r"Key '[^']+' is not in struct",
        r"Could not override '[^']+'",
        # a value that must be a multiple of another, in the libraries' wordings (verl's, TRL's "must be evenly
        # divisible by the number of generations", Megatron's and finetrainers' parallel degrees); never "should":
        # libraries advise multiples (tensor cores, padding) in warnings that stop nothing
        r"\bmust be (?:evenly )?divisible by\b|\bis not (?:evenly )?divisible by\b",
        r"\bmust be an? (?:integer )?multiple of\b",
        # transformers applying the chat template of a tokenizer that has none (a base model's), as verl's dataset
        # and agent loop do to every prompt
        r"chat_template is not set and no template argument was passed",
        # verl's FSDP checkpoint resumed on another GPU count: it looks for the shard of its own world size
        r"No such file or directory: '[^']*model_world_size_\d+_rank_\d+\.pt'",
        # vLLM's scheduler refusing to start: a step's token budget below one sequence, chunked prefill off
        r"max_num_batched_tokens \(\d+\) is smaller than max_model_len \(\d+\)",
        SLURM_TIME_REFUSED.pattern,
        SLURM_MEM_REFUSED.pattern,
        # vLLM refusing bfloat16 on a card before Ampere: the rollout's dtype must be float16 there
        r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0",
        *(refused.pattern for refused in PROMPT_FILLS_CONTEXT),  # kept by data.filter_overlong_prompts=false
        UNEQUAL_CHUNK.pattern,
        # verl's own checks of the rollout against the model (vllm_async_server.py _validate_configs) and vLLM's LoRA
        # ranks (vllm_rollout/utils.py get_vllm_max_lora_rank)
        r"max_model_len \(\d+\) should be less than or equal to max_position_embeddings \(\d+\)",
        LORA_RANK_REFUSED.pattern,
        # DeepSpeed's batch check: train_batch_size against micro batch x accumulation x world size
        r"Check batch related parameters|train_batch_size is not equal to micro_batch_per_gpu",
        # Hydra composing the config (its InstantiationException wraps whatever a constructor raised: never read)
        r"\b(?:ConfigCompositionException|MissingConfigException|OverrideParseException)\b",
        # ... except where the constructor it wraps is one of verl's config classes: their checks refuse values
        r"Error in call to target 'verl\.(?:workers|trainer)\.config\.",
        r"Could not (?:append to|delete from) config\b|\bError merging override\b",
        # the same in Hydra's short form (no class name): a config group option or primary config it cannot find,
        # and its pointer to the override grammar under a parse error
        r"\bIn '[^']+': Could not (?:find|load) '[^']+'|\bCannot find primary config '[^']+'",
        HYDRA_OVERRIDE_GRAMMAR.pattern,
        # Hydra instantiating a `_target_` it cannot import, and Python refusing a script path it cannot open
        HYDRA_TARGET_MISSING.pattern,
        SCRIPT_NOT_OPENED.pattern,
        # a command line the script's argument parser refused, in each parser's own words: transformers'
        # HfArgumentParser, argparse (and draccus' and jsonargparse's on top of it), tyro, click and typer, draccus'
        # config files, pydantic models that forbid extra fields (v2 and v1)
        r"Some specified arguments are not used by the HfArgumentParser",
        r": error: (?:unrecognized arguments: |the following arguments are required: |argument [\w/-]+: |ambiguous "
        r"option: )",
        r"^error: (?:unrecognized arguments: |Parser key \"[^\"]+\"|Option '[^']+' is not accepted)",
        r"\bUnrecognized (?:options|arguments): -|\bError parsing --[\w.-]+:",
        r"\bNo such option:? '?-|\bInvalid value for '(?:-|[A-Z][A-Z_]*')|\bMissing option '-",  # an option or METAVAR
        r"\bGot unexpected extra arguments? \(",
        r"\bThe fields? `[^`]+` (?:are|is) not valid for \w+|DecodingError: `[^`]+`: ",
        r"Extra inputs are not permitted|extra fields not permitted",
        # pydantic validating a trainer's config class (prime-rl's, pydantic-settings' CLI parsing): the fields follow
        r"ValidationError: \d+ validation errors? for \w*(?:Config|Settings|Args|Arguments)\b",
    ),
    "ray_node_lost": (
        r"has been marked dead because the detector has missed too many heartbeats",
        r"NodeDiedError",
        r"its node has died|node \S+ (?:has )?died|The node .* has been marked dead",
        r"health check failed due to missing too many heartbeats",
        r"raylet (?:has )?died|RayletDied|Owner's node has crashed",
        r"ActorUnavailableError: .*(?:failed to connect|Failed to connect)",  # the actor's node no longer answers
        # rlaunch's worker task: its `ray start --block` died mid-run (a SIGTERM is scancel's or the time limit's:
        # SLURM's own line says which)
        r"the Ray worker on \S+ (?:exited with code|was stopped by SIGKILL)",
        r"the node it was running on is dead or unavailable",  # Ray's NODE_DIED task error
        r"mistakenly been marked (?:as )?dead by the (?:GCS|monitor)",
        r"This node has bee[nm] marked as dead",  # the raylet's own fatal line (Ray spells it "beem")
        # the raylet exits with its dashboard or runtime-env agent (it fate-shares with them), taking its node down
        r"The raylet exited immediately because (?:one Ray agent failed|the runtime env agent timed out)",
        # Ray's log monitor on a raylet that exited without being told to (SIGKILL, a crash)
        r"Raylet is terminated.*Termination is unexpected|Termination is unexpected\. Possible reasons include",
        # SLURM lost a node of the job (slurmctld stopped hearing from its slurmd): the step's cancel line, srun's
        # line, and the NODE_FAIL state as the tools report it
        r"DUE TO NODE FAILURE",
        r"srun: error: Node failure on \S+",
        *slurm_state("NODE_FAIL"),
    ),
    "nccl_timeout": (
        r"Watchdog caught collective operation timeout",
        r"NCCL (?:communicator was aborted|timeout)|ncclSystemError|ncclInternalError|ncclRemoteError",
        # torch wraps every backend failure in DistBackendError: only one that says it timed out is a hang (a bare
        # store recv failure is the echo of a peer that crashed for some other reason)
        r"DistBackendError: .*(?i:timed? ?out|timeout|watchdog)",
        r"Some NCCL operations have failed or timed out",
        r"ProcessGroupNCCL's watchdog got stuck for \d+ seconds|Heartbeat monitor timed out",
        # HCCL's (verl on Ascend NPUs, torch_npu) collective that a peer never joined: its EI0006 socket timeout
        r"Getting socket times out\. Reason: Remote Rank did not send the data in time",
        # torch's rendezvous before the first collective: the store's host waiting for ranks that never came, and a
        # rank that never reached the store's host (TCPStore's own messages; torchrun's elastic agent's timeout)
        r"Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined",
        r"The client socket has timed out after \d+m?s while trying to connect to \(",
        r"\bRendezvousTimeoutError\b",
        # a process group forming over the store (Gloo's, NCCL's): a rank waiting for a peer's key that never came
        r"DistStoreError: wait timeout after \d+ ?ms, keys:",
        # the NCCL watchdog's desync report of the collective that timed out (ProcessGroupNCCL.cpp), where a log kept
        # it and not the watchdog's own line
        r"\bTimeout at NCCL work: \d+",
        # NCCL's own network failures, where the log stops before the error they return (vLLM's pynccl names none)
        GLOO_TIMEOUT.pattern,
        IB_COMPLETION_ERROR.pattern,
        NCCL_NO_INTERFACE.pattern,
    ),
}
COMPILED = {kind: [re.compile(pattern) for pattern in patterns] for kind, patterns in SIGNATURES.items()}

# The frames of a traceback that say the exception came out of reward code: verl's managers and scorers, rewards/,
# math-verify, and the trainer's own calls into them (ray_trainer's reward_fn / _score_output / compute_reward).
# A remote reward server's client (OpenRLHF's remote_rm_utils, a reward API) counts too: its server is reward code.
REWARD_FRAME = re.compile(
    r'File "[^"]*(?:reward_score|reward_manager|/rewards/|reward_loop|compute_score|/math_verify/|remote_rm\w*\.py'
    r"|reward_(?:api|server)\w*\.py)"
    r'|File "[^"]*", line \d+, in (?:\w*reward_fn|_score_output|compute_reward\w*|compute_score\w*|remote_rm\w*)\b'
)
# An exception whose message names reward code counts as much as a frame that does: verl loads a custom reward file
# as the module `custom_module`, its scorers live in reward_score, its managers call compute_score / reward_fn.
REWARD_MESSAGE = re.compile(
    r"custom_module|reward_score|reward_manager|reward_loop|compute_score|reward_fn|reward[ _]function"
)
# verl's reward managers (prime, the DAPO reward loop) catch a scorer's exception and print it on one line: it is a
# reward error when the message names reward code (the line alone is printed by much else)
REWARD_TASK_FAILED = re.compile(r"\[Error\] Task failed: (?P<message>.*)")
# an exception out of the `ray start` CLI, or out of the code that starts a node's processes (ray.init() runs it
# too), is a failed start, whatever its message
RAY_START_FRAME = re.compile(
    r'File "[^"]*ray/scripts/scripts\.py", line \d+, in start\b'
    r'|File "[^"]*ray/_private/services\.py", line \d+, in wait_for_node\b'
    r'|File "[^"]*ray/_private/node\.py", line \d+, in start_(?:head|ray)_processes\b'
    r'|File "[^"]*ray/_private/services\.py", line \d+, in start_(?:api_server|gcs_server|raylet)\b'
)
# OmegaConf refusing a key in struct mode, and the frame of its own setter: a key written by code (OmegaConf's
# __setitem__ / __setattr__ / update called from the application, not from Hydra applying an override) is that code's
# bug, not the user's config; a key read that the config lacks stays a config error
STRUCT_REFUSAL = re.compile(r"is not in struct|\bConfig(?:Key|Attribute)Error\b")
OMEGACONF_SETTER = re.compile(r'File "[^"]*/omegaconf/\w+\.py", line \d+, in (?:__setitem__|__setattr__|update)\b')
CONFIG_LIBRARY_FRAME = re.compile(r'File "[^"]*/(?:omegaconf|hydra)/')
# Ray prints a remote task's traceback under this line, without a new "Traceback" header
RAY_TASK_ERROR = re.compile(r"RayTaskError(?:\(\w+\))?: ray::")
EXCEPTION_LINE = re.compile(r"^(?:\([^)]*\)\s*)?(?:[\w.]+\.)?(?:\w*Error|\w*Exception|Killed)\b[:(]?")
# rlaunch's own wrapper line names no cause; it is never evidence (launch/job.py raises it)
WRAPPER = re.compile(r"verl exited with code|Submitted job triggered an exception|submitit ERROR")

# Where a line names the node it comes from: Ray's prefixes and messages, rlaunch's Ray bring-up, SLURM.
NODE_PATTERNS = (
    re.compile(r"\[node (\S+)\]\s*$"),  # ray_texts marks each line of a node's copied logs
    re.compile(r"on node (\S+?)[\s:(]"),
    re.compile(r"Ray node\(s\) (\S+)"),
    re.compile(r"Ray did not come up\b.*?\bnode(?:\(s\)|s)? ([\w.-]+)"),  # launch/job.py's fail-fast message
    re.compile(r"node name: (\S+?)[,\s]"),
    re.compile(r"the Ray (?:head|worker) on ([\w.-]+)"),
    re.compile(r"ipv4:([\d.]+\d):\d+"),
    re.compile(r"\bip[=:] ?([\d.]+\d)"),
    re.compile(r"\bIP: ([\d.]+\d)"),
    # srun: the node (or node list) SLURM lost, before the node its step ran on (slurmstepd's cancel line names the
    # batch host, c1, where a two-node job lost c2)
    re.compile(r"Node failure on ([\w.\[\],-]+)"),
    re.compile(r"JOB \d+ ON (\S+) CANCELLED"),
    re.compile(r"^slurmstepd-([\w.-]+): "),  # slurmd -N <node> prefixes its step daemon's lines
    re.compile(r"Local node IP: (\S+)"),
)

INTERRUPTIONS = ("preempted", "time_limit")

PHASE_FRAMES = (  # verl's function and Ray task names -> the preflight's phase
    ("log-prob", re.compile(r"compute_(?:ref_)?log_prob|infer_batch|logprob")),
    ("training", re.compile(r"update_actor|update_policy|train_batch|train_mini_batch|forward_backward|backward")),
    ("rollout", re.compile(r"generate_sequences|wake_up|rollout")),
)
# only names from tracebacks and Ray's task names: a log also prints overrides such as actor_rollout_ref.* that
# name every phase
CALL_NAMES = re.compile(r'File "[^"]*", line \d+, in (\w+)|ray::\w+\.(\w+)\(')


def phase_of(text: str) -> str | None:
    """The preflight phase an OOM happened in, from the function names of its traceback (None: it names none)."""
    names = [first or second for first, second in CALL_NAMES.findall(text)]
    for phase, pattern in PHASE_FRAMES:
        if any(pattern.search(name) for name in names):
            return phase
    return None


@dataclass
class Failure:
    """One failed (or interrupted) attempt: what went wrong, the lines that show it, and what to change."""

    kind: str  # one of KINDS or RECORDED_KINDS
    evidence: list[str]  # the line or few lines that show it, as they appear in the log
    attempt: int | None = None  # 1-based, in the order the job ran them
    node: str | None = None  # the host (or Ray IP) the evidence names
    fix: str = ""
    details: dict[str, float | str] = field(default_factory=dict)  # numbers parsed from the evidence

    @property
    def label(self) -> str:
        """The kind as shown: `kind?` where likeness.py read it from the log's words rather than a signature matched."""
        return f"{self.kind}?" if "likeness" in self.details else self.kind

    def short(self, chars: int = 60) -> str:
        """kind: what its most telling evidence line says (telling_line), without the log's own header (a timestamp is
        no reason), cut at a word boundary within `chars`: a table cell (status, compare's state column)."""
        text = telling_line(self.evidence)
        if len(text) > chars:
            cut = text[: chars + 1].rsplit(" ", 1)[0] if " " in text[:chars] else text[:chars]
            text = cut.rstrip(" ,;:-") + "…"
        return f"{self.label}: {text}" if text else self.label

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value not in (None, {}, "")}


# what a log line carries before what it says: submitit's `submitit WARNING (2026-11-20 10:41:00,960) - `, slurmstepd's
# `slurmstepd-c1: error: `, a bare leading timestamp with its level
LOG_HEADER = re.compile(
    r"^(?:submitit \w+ \([^)]*\) - |slurmstepd(?:-\S+)?: (?:error: )?|"
    r"\[?\d{4}-\d\d-\d\d[ T][\d:,.]+\]?\s*(?:(?:INFO|WARNING|ERROR|CRITICAL)\b\s*)?[-:]?\s*)"
)


# evidence lines that say where or through what an error passed, not what it was: a traceback's frame, Ray's header of a
# remote task's exception (its own exception line follows), Hydra's wrapper of whatever a constructor raised (not its
# failure to locate the target, which names it), and Ray's note that an actor died of an error in its constructor
NOT_TELLING = re.compile(
    r'^File "|^(?:[\w.]+\.)?RayTaskError(?:\(\w+\))?: ray::|\bInstantiationException\b(?!: Error locating target)'
    r"|^Error in call to target "
    r"|^(?:[\w.]+\.)?ActorDiedError: The actor died because of an error raised in its creation task"
)


def telling_line(evidence: list[str]) -> str:
    """The evidence line a one-line summary shows, without its log header: the first that says what went wrong (an
    exception's own message, a scheduler's line) rather than where (NOT_TELLING); where all are, the first that is not
    a frame, else the first; said from what failed (said_first)."""
    bodies = [LOG_HEADER.sub("", strip_prefix(line)).strip() for line in evidence]
    told = next((body for body in bodies if not NOT_TELLING.search(body)), None)
    told = told or next((body for body in bodies if not FRAME_LINE.match(body)), bodies[0] if bodies else "")
    return said_first(told)


# a traceback's frame as Python prints it
FRAME_LINE = re.compile(r'^File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<name>\S.*)$')


def said_first(body: str) -> str:
    """The line with what failed first: runpy's refusal of `python -m` without the interpreter's path Python puts
    before it (the fix names that Python), the missing module first; verl's loader missing a file or a name in it, as
    that file or name (its own words put them last, past a status cell's width); a frame, where a log cut short kept
    only that, as `function (file:line)`, as the hang's evidence names one (launch/watchdog.py frame_text)."""
    run = RUN_MODULE_FAILED.search(body)
    if run is not None and run["bare"]:
        return f"No module named {run['bare']}"
    if run is not None:
        return f"{run['error']}: {run['message']} (python -m {run['entry']})"
    if unnamed := REWARD_NAME_MISSING.search(body):
        return f"{unnamed['name']} not found in {unnamed['path']}"
    if missing := REWARD_FILE_MISSING.search(body):
        return f"module file not found: {missing['path']}"
    if (script := SCRIPT_NOT_OPENED.search(body)) and script["errno"] == "2":
        return f"script not found: {script['path']}"
    if located := HYDRA_TARGET_MISSING.search(body):
        return f"Hydra could not locate target '{located['target']}'"
    frame = FRAME_LINE.match(body)
    return f"{frame['name']} ({frame['path']}:{frame['line']})" if frame else body


def strip_prefix(line: str) -> str:
    """The line without Ray's `(WorkerDict pid=..., ip=...)` prefix and indentation."""
    return re.sub(r"^\([^)]*\)\s*", "", line).strip()


def unlabelled(text: str) -> str:
    """The log without srun's --label prefixes (SRUN_LABEL) where most of its non-blank lines carry one, SLURM's own
    lines aside (they never do, and a short log is mostly them): a log of `srun --label` reads as the same log
    unlabelled. In any other log a line that starts with a number and a colon is what it says, and is left as it is."""
    lines = text.splitlines()
    filled = [line for line in lines if line.strip() and not SLURM_OWN_LINE.match(line)]
    if sum(bool(SRUN_LABEL.match(line)) for line in filled) * 2 <= len(filled):
        return text
    return "\n".join(SRUN_LABEL.sub("", line, count=1) for line in lines)


TRACEBACK_HEADER = re.compile(r"Traceback \(most recent call last\)")
# where the part of a traceback a log kept can begin without its header: a log (or its tail) that starts mid-traceback
# starts at a frame, and Ray prints a remote task's traceback under its RayTaskError line
HEADLESS_START = re.compile(r'File "[^"]+", line \d+, in \S|(?:[\w.]+\.)?RayTaskError(?:\(\w+\))?: ray::')
# a log's first line cut inside a frame (logs.read_tail starts at a byte offset, a paste at a selection): what is left
# of `File "<path>", line N, in <name>` still says where it was raised
CUT_FRAME = re.compile(r'^\s*"?(?P<rest>[^"\s]+", line \d+, in \w.*)$')
# Python's hook for an exception it could not raise (in a finalizer, a __del__, a weakref callback, a thread at exit)
# prints it under this line and goes on: that traceback stopped nothing
UNRAISABLE = re.compile(r"^Exception ignored\b")


def line_prefix(prefix: str) -> re.Pattern[str] | None:
    """What a traceback's first line carries before it (a timestamp, srun's task label, Ray's process prefix, a quote
    mark), as a pattern its other lines match: their digits (times, pids, ranks) may differ."""
    prefix = prefix.strip()
    if not prefix:
        return None
    return re.compile(r"\s*" + re.sub(r"\d+", r"\\d+", re.escape(prefix)))


def traceback_body(line: str, prefix: re.Pattern[str] | None) -> str:
    carried = prefix.match(line) if prefix else None
    return strip_prefix(line[carried.end() :] if carried else line)


def tracebacks(lines: list[str]) -> list[tuple[list[str], str]]:
    """(frames, exception line) of each Python traceback in the log, whatever each of its lines is prefixed with, the
    part of one a log kept included (no header: the log starts inside it; no exception: the log stops inside it)."""
    found = []
    frames: list[str] | None = None
    prefix: re.Pattern[str] | None = None
    ignored = False  # the traceback being read is one Python ignored (UNRAISABLE)
    first = next((index for index, line in enumerate(lines) if line.strip()), None)
    for index, line in enumerate(lines):
        cut = CUT_FRAME.match(line) if index == first else None
        if cut:
            frames, prefix = [f'File "{cut.group("rest")}'], None
            continue
        header = TRACEBACK_HEADER.search(line)
        if header:
            frames, prefix = [], line_prefix(line[: header.start()])
            before = next((earlier for earlier in reversed(lines[:index]) if earlier.strip()), "")
            ignored = bool(UNRAISABLE.match(strip_prefix(before)))
            continue
        if frames is None:
            headless = HEADLESS_START.search(line)
            if not headless:
                continue
            frames, prefix = [], line_prefix(line[: headless.start()])
        body = traceback_body(line, prefix)
        if body.startswith("File "):
            frames.append(body)
        elif EXCEPTION_LINE.match(body):
            if not ignored:
                found.append((frames, line))
            ignored = False
            # the remote part of a Ray task's traceback follows its RayTaskError line: keep reading it
            frames = [] if RAY_TASK_ERROR.search(body) else None
    if frames:  # a log cut short inside a traceback: its deepest frame is still where it was raised
        found.append((frames, ""))
    return found


WRAP_MIN = 60  # a width below this is no terminal's or tracker's wrap


def unwrap(lines: list[str]) -> list[str]:
    """The lines of a log hard-wrapped at a fixed width (a terminal's, a tracker's) rejoined: every line exactly as
    long as the most common long length continues on the next. The lines unchanged where no width repeats."""
    widths = Counter(len(line) for line in lines if len(line) >= WRAP_MIN).most_common(1)
    if not widths or widths[0][1] < 3:
        return lines
    width = widths[0][0]
    joined: list[str] = []
    carried = ""
    for line in lines:
        carried += line
        if len(line) != width:
            joined.append(carried)
            carried = ""
    return [*joined, carried] if carried else joined


def is_source(line: str) -> bool:
    """A traceback's source line (`raise RuntimeError(f"the Ray worker on {...}`) quotes a message without being it."""
    body = strip_prefix(line)
    return body.startswith(("raise ", "return ")) or 'f"' in body or "f'" in body


def match_kind(kind: str, lines: list[str]) -> list[str]:
    """The lines that show `kind`, in log order: the first is the cause, the later ones mostly its echoes."""
    lines = [line for line in lines if not is_source(line)]
    hits = [line for line in lines if any(p.search(line) for p in COMPILED[kind])]
    if kind == "reward_error":
        hits += [
            line
            for line in lines
            if (failed := REWARD_TASK_FAILED.search(line)) and REWARD_MESSAGE.search(failed.group("message"))
        ]
        hits += from_tracebacks(lines, REWARD_FRAME, REWARD_MESSAGE)
        # what a custom reward file raised as verl loaded it says more than verl's wrapper of it: it comes first
        hits = [*module_load_cause(lines), *hits]
    elif kind == "ray_start_failed":
        hits += from_tracebacks(lines, RAY_START_FRAME, None) + died_connecting(lines) + gave_up_retrying(lines)
        hits = hits or unended_wait(lines, NODES_WAIT) or unended_wait(lines, RAYLET_SOCKET_RETRY)
    elif kind == "cuda_oom":
        hits += worker_raised_oom(lines)
    elif kind == "model_not_cached":
        hits += unreachable_fetch(lines)
    elif kind == "data_missing":
        hits += [line for line in reader_file_not_found(lines) if line not in hits]
    elif kind == "data_error":
        hits += from_tracebacks(lines, DATASET_GENERATION_FRAME, None) + raised_by(lines, KEY_ERROR, RECORD_FIELD)
    elif kind == "config_error":
        if hits and code_wrote_struct_key(lines):
            hits = [line for line in hits if not STRUCT_REFUSAL.search(line)]
        hits += raised_by(lines, ZERO_DIVISION, BATCH_ARITHMETIC) + raised_in(lines, VERL_CONFIG_CHECK)
        hits += died_importing(lines)
        hits = [*unparsable_model_config(lines), *hydra_target_missing(lines), *hits]
    elif kind == "gpu_unavailable":
        # a count that names the GPUs asked and had is no shortage where they suffice (a trial short of CPUs lists
        # its GPUs as well)
        hits = [line for line in hits if not ((counted := gpus_asked_and_had(line)) and counted[1] >= counted[0])]
        if not hits:
            hits = unended_wait(lines) or driver_unreachable(lines)
    elif kind == "ray_node_lost" and hits:
        # the raylet's heartbeats lagging before it was marked dead (the node was starved, not cut off): evidence
        # only, never a cause on its own, as a loaded but healthy node prints it too
        lagged = [line for line in lines if HEARTBEAT_LAG.search(line)]
        hits = [line for line in lines if line in hits or line in lagged]
    return hits


# Ray's header for an exception a worker's own code raised: torch's CUDA OutOfMemoryError (Ray's memory monitor does
# not raise in the worker's code: the caller gets its OutOfMemoryError unwrapped, or an ActorDiedError, both saying
# "running low on memory", which host_oom reads first). Only a task that itself called ray.get on a task the monitor
# killed wraps Ray's class; its frames below the header pass through Ray's get, and that stays undecided.
WRAPPED_OOM = re.compile(r"RayTaskError\(OutOfMemoryError\)")
RAY_GET_FRAME = re.compile(r"ray/_private/(?:worker|client_mode_hook|auto_init_hook)\.py\S*, line \d+, in \w+")


def worker_raised_oom(lines: list[str]) -> list[str]:
    """Ray's `RayTaskError(OutOfMemoryError)` header where no frame after it goes through ray.get: a GPU's."""
    headers = [index for index, line in enumerate(lines) if WRAPPED_OOM.search(line)]
    if not headers or any(RAY_GET_FRAME.search(line) for line in lines[headers[0] :]):
        return []
    return [lines[index] for index in headers]


# a connection with no route out (errno 101) from Python's HTTP stack: on a compute node, the Hub a process reached for
# (a model, a tokenizer, a config re-read at a save) past the log's cut; never where the log names another host, W&B
# or reward code
NO_ROUTE = re.compile(r"\[Errno 101\] Network is unreachable")
HTTP_STACK_FRAME = re.compile(r'File "[^"]*/(?:urllib3|requests|httpx|httpcore)/')
OTHER_HOST = re.compile(
    r"host='(?!(?:[\w-]+\.)*(?:huggingface\.co|hf\.co)')[^']+'|\bwandb\b|api\.wandb\.ai", re.IGNORECASE
)


# a host name that did not resolve (getaddrinfo's EAI_NONAME, EAI_AGAIN) is the Hub's only where the traceback went
# through the Hub's client: httpx (huggingface_hub >= 1.0) does not name the host in its error
NO_NAME = re.compile(r"\[Errno -[23]\] (?:Temporary failure in name resolution|Name or service not known)")
HUB_CLIENT_FRAME = re.compile(r'File "[^"]*/(?:huggingface_hub|transformers)/')


def unreachable_fetch(lines: list[str]) -> list[str]:
    """The no-route line of a traceback through Python's HTTP stack, where nothing names a host other than the Hub's;
    or its unresolved name, where the Hub's client made the request."""
    if any(OTHER_HOST.search(line) or REWARD_FRAME.search(line) or DATA_READER_FRAME.search(line) for line in lines):
        return []
    if not any(HTTP_STACK_FRAME.search(line) for line in lines):
        return []
    unresolved = [line for line in lines if NO_NAME.search(line)] if any(map(HUB_CLIENT_FRAME.search, lines)) else []
    return [line for line in lines if NO_ROUTE.search(line)][:1] or unresolved[:1]


# a FileNotFoundError out of a data reader (Ray Data's read_* API, datasets' loaders, pandas' read_*), whatever its
# path looks like (no extension, a directory, cut from the log): the frame says a data file was being opened. Frames as
# Python prints them and as IPython does (a notebook's `.../read_api.py in read_csv(...)`, `File ...py:387, in ...`)
DATA_READER_FRAME = re.compile(
    r"(?:ray/data/read_api|datasets/load|pandas/io/[\w/]+)\.py(?:\", line \d+,|:\d+,)? in "
    r"(?:read_\w+|_get_read_tasks|load_dataset\w*|load_from_disk)\b"
    r"|ray/data/datasource/\w+\.py(?:\", line \d+,|:\d+,)? in \w+"  # a datasource expanding or opening its paths
)
FILE_NOT_FOUND = re.compile(r"(?:^|[\s(:])(?:[\w.]+\.)?FileNotFoundError(?::|\))")


def reader_file_not_found(lines: list[str]) -> list[str]:
    """The FileNotFoundError lines and the deepest data-reader frame, where the log has both."""
    missing = [line for line in lines if FILE_NOT_FOUND.search(line) and not SAVED_DATASET_INCOMPLETE.search(line)]
    readers = [line for line in lines if DATA_READER_FRAME.search(line)]
    return [*missing, *readers[-1:]] if missing and readers else []


# datasets generating a split from the data files: whatever its reader raises there (pyarrow on a cut or corrupt
# parquet fragment, a JSON line that does not parse) datasets re-raises as DatasetGenerationError, so a traceback
# through these frames is a data error even where the log stops before the exception
DATASET_GENERATION_FRAME = re.compile(
    r'File "[^"]*datasets/builder\.py", line \d+, in _prepare_split_single\b'
    r'|File "[^"]*datasets/packaged_modules/\w+/\w+\.py", line \d+, in _generate_(?:tables|examples)\b'
)

# An exception and the source line a traceback prints right above it: a KeyError raised reading a field of a data
# record (a collator's `feature["input_ids_j"]`, a dataset's `row_dict["prompt"]`) says the data lacks that column; a
# ZeroDivisionError raised by batch-size arithmetic (`ppo_mini_batch_size % ppo_micro_batch_size`) says a batch key
# came out 0 (verl normalises them by the GPU count and n). Two ranks printing at once may glue the exception's name
# to itself ("KeyErrorKeyError: : 'x'").
KEY_ERROR = re.compile(r"^(?:[\w.]+\.)?KeyError(?:KeyError)?\s*:")
RECORD_FIELD = re.compile(
    r"\b(?:features?|examples?|samples?|rows?|row_dict|records?|data_item|instances?|docs?)\[[\"'][^\"']+[\"']\]"
)
ZERO_DIVISION = re.compile(r"^(?:[\w.]+\.)?ZeroDivisionError\b")
BATCH_ARITHMETIC = re.compile(
    r"(?i:batch_size|micro_batch|mini_batch|world_size|n_gpus|num_gpus|gradient_accumulation|grad_acc|dp_size)"
)


# verl's own checks of its config: its config dataclasses' __post_init__ and validate methods, and validate_config;
# whatever they raise is verl refusing a value (the message names it), not a crash of the run
VERL_CONFIG_CHECK = re.compile(
    r'File "[^"]*verl/(?:workers|trainer)/config/\w+\.py", line \d+, in (?:__post_init__|validate\w*|_?check_\w+)\b'
    r'|File "[^"]*verl/utils/config\.py", line \d+, in (?:validate_config|check_mutually_exclusive)\b'
)


# Python's runpy refusing `python -m <entry>` (runpy._get_module_details): the interpreter exits before any code runs;
# "No module named 'verl.trainer'" inside it means a `verl` without `trainer` came first on sys.path
RUN_MODULE_FAILED = re.compile(
    r"Error while finding module specification for '(?P<entry>[\w.]+)' \((?P<error>\w+): (?P<message>.*)\)\s*$"
    r"|^\S*python[\d.]*: No module named (?P<bare>[\w.]+)\s*$"
)
# the interpreter's path that Python puts before that refusal: which Python the job ran
INTERPRETER = re.compile(r"^(?P<python>\S*python[\d.]*): (?=Error while finding|No module named)")
# an import that failed: a module not found, or one that raised while it was imported; a compiled extension built
# against another torch or CUDA (`.so: undefined symbol`) is a build mismatch, outside rlaunch's vocabulary
IMPORT_FAILED = re.compile(r"^(?:[\w.]+\.)?(?:ModuleNotFoundError|ImportError): (?!.*\.so[\d.]*: undefined symbol)")
# the module an import failure names: "No module named 'verl.trainer'", "cannot import name X from omegaconf"
MODULE_NAMED = re.compile(
    r"No module named '?(?P<module>[\w.]+)'?|cannot import name \W?\w+\W? from '?(?P<source>[\w.]+)'?"
)


# transformers re-raising json's error on a model's config.json (configuration_utils.py get_config_dict), and json's own
# message, which says where the text stopped parsing
MODEL_CONFIG_NOT_JSON = re.compile(r"It looks like the config file at '(?P<path>[^']+)' is not a valid JSON file")
JSON_DECODE_ERROR = re.compile(r"JSONDecodeError: (?P<message>.+?)\s*$")


def unparsable_model_config(lines: list[str]) -> list[str]:
    """[json's error, transformers' OSError] for a model config.json that does not parse: what the Hydra or verl
    wrapper above them only quotes."""
    said = next((at for at, line in enumerate(lines) if MODEL_CONFIG_NOT_JSON.search(strip_prefix(line))), None)
    if said is None:
        return []
    decode = [line for line in lines[:said] if JSON_DECODE_ERROR.search(line)]
    return [*decode[-1:], lines[said]]


def hydra_target_missing(lines: list[str]) -> list[str]:
    """[Hydra's line naming the `_target_` it could not locate, what importing it raised] (HYDRA_TARGET_MISSING): the
    raised exception's repr is on the line after Hydra's `Error loading '<target>':`, where the log holds the chain."""
    located = [line for line in lines if HYDRA_TARGET_MISSING.search(line)]
    if not located:
        return []
    causes = [
        following
        for index, line in enumerate(lines)
        if HYDRA_TARGET_LOAD.search(strip_prefix(line))
        and (following := next((later for later in lines[index + 1 :] if later.strip()), None)) is not None
        and HYDRA_LOAD_CAUSE.match(strip_prefix(following))
    ]
    return [located[0], *causes[:1]]


# verl loading a custom reward file (verl/utils/import_utils.py load_module): whatever the file raised as it ran (an
# import the job's environment lacks, a syntax error) is re-raised as this RuntimeError, the file's own exception as its
# direct cause, printed above it
REWARD_MODULE_FAILED = re.compile(r"Error loading module from module_path='(?P<path>[^']+)'")
# verl loading a module by its path (load_module, load_extern_object: reward.custom_reward_function, a custom dataset
# class): the file is not there, or has no object of that name
REWARD_FILE_MISSING = re.compile(r"Custom module file not found: module_path='(?P<path>[^']+)'")
REWARD_NAME_MISSING = re.compile(
    r"Object not found in module: object_name='(?P<name>[^']+)', module_path='(?P<path>[^']+)'"
)


def module_load_cause(lines: list[str]) -> list[str]:
    """[the exception the reward file raised, the file's deepest frame, verl's line] for verl's first 'Error loading
    module' line (REWARD_MODULE_FAILED): the nearest exception line above it is its direct cause."""
    for index, line in enumerate(lines):
        loader = REWARD_MODULE_FAILED.search(line)
        if loader is None or is_source(line):
            continue
        above = lines[:index]
        causes = [at for at, earlier in enumerate(above) if EXCEPTION_LINE.match(strip_prefix(earlier))]
        if not causes:
            return []
        in_file = [earlier for earlier in above[: causes[-1]] if f'File "{loader.group("path")}"' in earlier]
        return [above[causes[-1]], *in_file[-1:], line]
    return []


# where an import raises: a module's own top level (an import statement, or the module raising as it runs), or
# importlib's machinery (importlib.import_module); an import error a call returned (a Ray task's, through ray.get in a
# function) was raised in another process, which its own log shows
IMPORTING_FRAME = re.compile(r'File "[^"]+", line \d+, in <module>|File "<frozen importlib\.')


def died_importing(lines: list[str]) -> list[str]:
    """The job's process dying on an import: runpy's refusal of `python -m`, or an import error that ends the log's
    last traceback (rlaunch's wrapper aside) raised as a module was imported (IMPORTING_FRAME), [exception line, the
    deepest frame, where it was raised]. An import a library catches and goes on without (verl/workers/engine/
    __init__.py warns "torchtitan engine is not available: ModuleNotFoundError(...)") is no traceback of its own, and
    one a later exception wraps (`During handling of the above exception`) is that exception's cause, read by its own
    kind (a custom reward file's: reward_error)."""
    hits = [line for line in lines if RUN_MODULE_FAILED.search(strip_prefix(line))]
    raised = [
        (frames, exception) for frames, exception in tracebacks(lines) if exception and not WRAPPER.search(exception)
    ]
    if raised and IMPORT_FAILED.match(strip_prefix(raised[-1][1])):
        frames, exception = raised[-1]
        if frames and IMPORTING_FRAME.search(frames[-1]):
            hits += [exception, frames[-1]]
    return hits


def raised_in(lines: list[str], frame: re.Pattern[str]) -> list[str]:
    """[frame, exception line] of each traceback whose deepest frame, where it was raised, is one `frame` names."""
    return [
        hit
        for frames, exception in tracebacks(lines)
        if exception and frames and frame.search(frames[-1])
        for hit in (frames[-1], exception)
    ]


def raised_by(lines: list[str], exception: re.Pattern[str], source: re.Pattern[str]) -> list[str]:
    """[source line, exception line] for each `exception` whose source line right above it matches `source`."""
    hits = []
    for index, line in enumerate(lines):
        if not exception.match(strip_prefix(line)):
            continue
        above = next((earlier for earlier in reversed(lines[:index]) if earlier.strip()), "")
        if source.search(above) and not strip_prefix(above).startswith("File "):
            hits += [above, line]
    return hits


# ray.init joining a running cluster, and a process then killed by a signal without a Python traceback (srun's
# summary of the task, the shell's, Python's fatal-error handler)
RAY_CONNECTING = re.compile(r"Connecting to existing Ray cluster at address: ")
SIGNAL_DEATH = re.compile(
    r"srun: error: \S+: tasks? [\d,-]+: (?:Aborted|Segmentation fault)"
    r"|^(?:\d+: )?(?:Aborted|Segmentation fault)(?: \(core dumped\))?$"
    r"|Fatal Python error: (?:Aborted|Segmentation fault)"
)
# a segmentation fault reported anywhere in a log (SIGNAL_DEATH above is a line that is nothing but a death): Python's
# faulthandler, Ray's and glog's handler, the shell's, torch's elastic agent. Ray's worker-death message lists "SIGSEGV"
# among its guesses: only a report of one counts
SEGFAULT = re.compile(
    r"Fatal Python error: Segmentation fault|\*\*\* SIGSEGV received|Segmentation fault \(core dumped\)"
    r"|Signal 11 \(SIGSEGV\) received"
)


def died_connecting(lines: list[str]) -> list[str]:
    """The driver killed by a signal right after ray.init said it was connecting to a running cluster, nothing but
    the death after it: Ray's core worker aborts when it cannot reach the cluster's GCS or raylet, in some setups (a
    container, Ray 1) before any error line of its own. A driver that connected says so ("Connected to Ray cluster")
    or goes on printing, so a later crash never reads as this."""
    connecting = [index for index, line in enumerate(lines) if RAY_CONNECTING.search(line)]
    if not connecting:
        return []
    after = [line for line in lines[connecting[-1] + 1 :] if line.strip()]
    if after and all(SIGNAL_DEATH.search(strip_prefix(line)) for line in after):
        return [lines[connecting[-1]], after[0]]
    return []


# Ray 0.x's `ray start` retrying the head's Redis (its GCS then), and the `ray` command line's own entry frame
REDIS_RETRY = re.compile(r"Failed to connect to the redis server, retrying")
RAY_CLI_ENTRY = re.compile(r'File "[^"]*/bin/ray", line \d+, in <module>')


def gave_up_retrying(lines: list[str]) -> list[str]:
    """`ray start` retrying the head's Redis, then the `ray` command itself crashing: it never reached the head. The
    retries alone are no cause (they are logged at INFO and usually succeed)."""
    retries = [index for index, line in enumerate(lines) if REDIS_RETRY.search(line)]
    if retries and any(RAY_CLI_ENTRY.search(line) for line in lines[retries[0] :]):
        return [lines[retries[0]]]
    return []


def code_wrote_struct_key(lines: list[str]) -> bool:
    """A traceback in which application code set a key on a struct-mode OmegaConf config: OmegaConf's setter is
    called from a frame outside OmegaConf and Hydra. Hydra applying a command-line override says "Could not override"
    instead, which stays the user's config error."""
    if any("Could not override" in line for line in lines):
        return False
    for frames, _ in tracebacks(lines):
        setters = [index for index, frame in enumerate(frames) if OMEGACONF_SETTER.search(frame)]
        if setters and setters[0] > 0 and not CONFIG_LIBRARY_FRAME.search(frames[setters[0] - 1]):
            return True
    return False


HEARTBEAT_LAG = re.compile(r"Last heartbeat was sent \d+ ms ago")
# vLLM's Ray executor waiting for the placement group of its GPU workers (it says so at growing intervals)
PLACEMENT_GROUP_WAIT = re.compile(r"Waiting for creating a placement group of specs for \d+ seconds.*'GPU'")


# an exception's line behind any prefix a launcher puts before it (`[rank1]: `, a timestamp)
RAISED_ANYWHERE = re.compile(r"\b[\w.]*(?:Error|Exception): ")
# Ray's cluster launchers (`ray symmetric-run`, a head's own wait) counting the nodes that joined, fewer than asked
NODES_WAIT = re.compile(r"Waiting for nodes to start\.\.\. (?P<up>\d+)/(?P<asked>\d+) nodes started")
# a core worker retrying its node's raylet socket (Ray's raylet_client): a log that ends in it never got one
RAYLET_SOCKET_RETRY = re.compile(r"Retrying to connect to socket for pathname \S*/sockets/raylet")


def unended_wait(lines: list[str], wait: re.Pattern[str] = PLACEMENT_GROUP_WAIT) -> list[str]:
    """The last line of a wait (vLLM's for GPUs, Ray's for nodes) when the log ends in it: nothing after it raised or
    shows a known cause. A wait that ended (the group formed late, then something else failed) is no cause, so the
    wait alone never outranks it."""
    waits = [index for index, line in enumerate(lines) if wait.search(line)]
    if not waits:
        return []
    after = lines[waits[-1] + 1 :]
    failed_later = any(
        EXCEPTION_LINE.match(strip_prefix(line))
        or RAISED_ANYWHERE.search(line)
        or any(p.search(line) for ps in COMPILED.values() for p in ps)
        for line in after
    )
    return [] if failed_later else [lines[waits[-1]]]


# a trainer's count of the GPUs it asked for against those the cluster has, in each wording: asked first, then had
GPUS_ASKED_HAD = (
    re.compile(r"(?i:requested (?P<asked>[\d.]+) GPUs?,? but only (?P<had>[\d.]+))"),
    # Ray Tune's older trial executor: "You asked for 5.0 cpu and 2.0 gpu per trial, but the cluster only has 72.0 cpu
    # and 1.0 gpu"
    re.compile(r"(?P<asked>[\d.]+) gpu per trial, but the cluster only has [\d.]+ cpu and (?P<had>[\d.]+) gpu"),
    re.compile(
        r"requires \{['\"]GPU['\"]: (?P<asked>[\d.]+)\} but the cluster only has a maximum of \{['\"]GPU['\"]: "
        r"(?P<had>[\d.]+)"
    ),
    re.compile(
        r"(?i:requested [^\n]{0,40}?\b(?P<asked>[\d.]+) GPUs?, but the cluster has only [^\n]{0,40}?\b(?P<had>[\d.]+) "
        r"GPUs?)"
    ),
    re.compile(
        r"(?i:requires? (?:at least |a minimum of )?(?P<asked>\d+) GPUs?\b[^\n]{0,40}?\b(?:found|only|got|but) "
        r"(?:only )?(?P<had>\d+))"
    ),
)


def gpus_asked_and_had(text: str) -> tuple[float, float] | None:
    """The GPUs a trainer's message says it asked for and the cluster had, where it names both."""
    counted = next((found for pattern in GPUS_ASKED_HAD if (found := pattern.search(text))), None)
    return (float(counted.group("asked")), float(counted.group("had"))) if counted else None


# nvidia-smi in a job that sees no GPU: no driver answers on the node (a CPU node, a driver that is down), or SLURM gave
# the job no GPU and hid the node's devices
NVIDIA_SMI_NO_GPU = re.compile(
    r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver|^No devices were found$"
)


# the job's own processes ran kernels or collectives on a GPU: it had one, whatever nvidia-smi said elsewhere
GPU_IN_USE = re.compile(r"\bCUDA error\b|device-side assert|\bNCCL (?:INFO|WARN)\b")


def driver_unreachable(lines: list[str]) -> list[str]:
    """nvidia-smi's own failure, only where no other cause shows anywhere in the log and nothing shows a GPU at work:
    nvidia-smi may have run elsewhere (a login node, a prolog), so it never outranks a cause the log names."""
    failed = [line for line in lines if NVIDIA_SMI_NO_GPU.search(strip_prefix(line))]
    if not failed or any(GPU_IN_USE.search(line) for line in lines):
        return []
    if any(match_kind(other, lines) for other in KINDS[:-1] if other != "gpu_unavailable"):
        return []
    return failed[:1]


def from_tracebacks(lines: list[str], frame: re.Pattern[str], message: re.Pattern[str] | None) -> list[str]:
    """The deepest matching frame and the exception line of each traceback that passes through code `frame` names
    (or whose exception message `message` names it); rlaunch's wrapper never counts."""
    hits = []
    for frames, exception in tracebacks(lines):
        matched = [line for line in frames if frame.search(line)]
        named = message is not None and exception and message.search(strip_prefix(exception).split(":", 1)[-1])
        if (matched or named) and not WRAPPER.search(exception):
            hits += [*matched[-1:], *([exception] if exception else [])]
    return hits


def summary(failures: list[Failure], chars: int = 60) -> str:
    """Each failed attempt's cause in order: 'preempted > cuda_oom: torch.OutOfMemoryError: ...'."""
    if not failures:
        return ""
    kinds = " > ".join(failure.kind for failure in failures[:-1])
    return (kinds + " > " if kinds else "") + failures[-1].short(chars)


def render(failure: Failure) -> list[str]:
    """The lines a terminal shows for one failure: cause, evidence, fix."""
    where = ", ".join(
        part
        for part in (f"attempt {failure.attempt}" if failure.attempt else "", failure.node and f"node {failure.node}")
        if part
    )
    lines = [f"[{failure.label}]" + (f" ({where})" if where else "")]
    lines += [f"  evidence: {line}" for line in failure.evidence] or ["  evidence: (no error line in the log)"]
    lines.append(f"  fix: {failure.fix}")
    return lines
