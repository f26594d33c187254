"""The failure classifier on the second to ninth held-out corpora (tests/data/failures_heldout2/<kind>/ to
tests/data/failures_heldout9/<kind>/): public logs collected after the tuning before them, labelled from their threads
before the classifier ran on them.

All eight sets are SPENT, like the first held-out set: each was measured once, untouched (held-out-2 on 2026-11-24:
21/31, bench/results/failures.txt note 4; held-out-3 after that: 28/35, note 6; held-out-4 after that: 27/37, note 8;
held-out-5 after that: 25/32, note 10; held-out-6 after that: 21/32, note 12; held-out-7: 17/23, note 14; held-out-8:
23/27, note 15; held-out-9: 16/29, note 17), and signatures were then added for the misses that show a clear message
(notes 5, 7, 9, 11, 13, 16 and 18; from held-out-5 on, for the whole family of messages each miss belongs to). The
scores pinned here are the tuned ones; they guard the corpora against regressions, and they are no held-out numbers
any more: the next honest held-out score comes from a fresh, blind set. The tenth set (held-out-10: 19/28 on first
sight, note 20; tuned in note 21) and the eleventh (held-out-11: 15/26 on first sight, note 22; tuned in note 23) and
the twelfth (held-out-12: 15/23, note 24; tuned in note 25) and the thirteenth (held-out-13: 12/20, note 26; tuned in
note 27) are spent the same way. The fourteenth (held-out-14, from the stored pages corpus: 2/2, note 28) is not spent:
it is two logs, too few to tune on or to be a measurement of their own."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bench.failures import CORPORA, FIRST_SIGHT, SPENT, TRAINED_ON, Excerpt, load_corpus, score
from launch.report import failures

HELD_OUT_2 = load_corpus(CORPORA["held-out-2"])
EARLIER = [*load_corpus(CORPORA["tuning"]), *load_corpus(CORPORA["held-out"])]

# what the set scored when it was still held out (2026-11-24): kept as the record of that measurement
MEASURED_ON_FIRST_SIGHT = 21
# after tuning on its misses (note 5): the one left is a preemption that submitit itself announced as a time-out
TUNED_RIGHT = 30  # of 31
TUNED_MISSES = {"preempted/submitit-1656-misread-as-timeout": "time_limit"}


def name(excerpt: Excerpt) -> str:
    return f"{excerpt.kind}/{excerpt.path.stem}"


def test_the_corpus_is_fresh_real_and_labelled_with_known_kinds() -> None:
    assert len(HELD_OUT_2) == 31
    assert {excerpt.kind for excerpt in HELD_OUT_2} <= set(failures.KINDS)
    assert sum(excerpt.kind == "unknown" for excerpt in HELD_OUT_2) >= 3
    for excerpt in HELD_OUT_2:
        assert excerpt.source.startswith("https://github.com/"), name(excerpt)
        assert excerpt.text.strip(), name(excerpt)
    sources = [excerpt.source for excerpt in HELD_OUT_2]
    assert len(set(sources)) == len(sources), "one thread, one excerpt"
    assert not set(sources) & {excerpt.source for excerpt in EARLIER}, "a thread of an earlier corpus is not held out"


def test_the_spent_set_keeps_its_tuned_score() -> None:
    result = score(HELD_OUT_2)
    misses = {name(excerpt): found for excerpt, found in result.rows if found != excerpt.kind}
    assert (result.right, result.total) == (TUNED_RIGHT, len(HELD_OUT_2))
    assert misses == TUNED_MISSES
    assert TUNED_RIGHT > MEASURED_ON_FIRST_SIGHT


OOV = [excerpt for excerpt in HELD_OUT_2 if excerpt.kind == "unknown"]


@pytest.mark.parametrize("excerpt", OOV, ids=lambda excerpt: excerpt.path.stem)
def test_out_of_vocabulary_failures_stay_unknown(excerpt: Excerpt) -> None:
    # verl-1611 among them: a store recv failure in torch's DistBackendError is no NCCL timeout without a timeout
    assert failures.classify(excerpt.text).kind == "unknown"


# --- the third set: collected blind, measured once (28/35), then tuned on: spent too ---------------------------------

HELD_OUT_3 = load_corpus(CORPORA["held-out-3"])
# what the set scored when it was still held out (2026-11-24, note 6): every miss came out unknown, none wrong
MEASURED_ON_FIRST_SIGHT_3 = 28
# after tuning on its misses (note 7): the two left were logs that cannot decide between two causes; their fixes say
# what does (tests/test_failures_heldout3_tuning.py). Since note 27, Ray's wrapper of an OutOfMemoryError a worker's
# own code raised is read as torch's (verl-647): the one left
TUNED_RIGHT_3 = 34  # of 35
TUNED_MISSES_3 = {
    # only Ray's list of possible causes (the OOM killer, `ray stop --force`, a crash): the tuning corpus holds the
    # same message as unknown (verl-4921); the host-memory cause is in the thread, not the log
    "host_oom/openrlhf-187-actor-killed-docker-limit": "unknown",
}


def test_the_third_set_is_fresh_and_real():
    sources = [excerpt.source for excerpt in HELD_OUT_3]
    assert len(HELD_OUT_3) == 35 and len(set(sources)) == len(sources)
    assert {excerpt.kind for excerpt in HELD_OUT_3} <= set(failures.KINDS)
    assert all(source.startswith("https://github.com/") for source in sources)
    assert not set(sources) & {excerpt.source for excerpt in [*EARLIER, *HELD_OUT_2]}


def test_the_third_spent_set_keeps_its_tuned_score():
    result = score(HELD_OUT_3)
    misses = {name(excerpt): found for excerpt, found in result.rows if found != excerpt.kind}
    assert (result.right, result.total) == (TUNED_RIGHT_3, len(HELD_OUT_3))
    assert misses == TUNED_MISSES_3
    assert TUNED_RIGHT_3 > MEASURED_ON_FIRST_SIGHT_3
    assert result.out_of_vocabulary_unknown == result.out_of_vocabulary == 5


OOV_3 = [excerpt for excerpt in HELD_OUT_3 if excerpt.kind == "unknown"]


@pytest.mark.parametrize("excerpt", OOV_3, ids=lambda excerpt: excerpt.path.stem)
def test_the_third_sets_out_of_vocabulary_failures_stay_unknown(excerpt: Excerpt) -> None:
    # illegal memory accesses and flash-attn's undefined symbols: no rule added from the misses names them
    assert failures.classify(excerpt.text).kind == "unknown"


# --- the fourth set: collected blind while the third was tuned on, measured once (27/37), then tuned on: spent -------

HELD_OUT_4 = load_corpus(CORPORA["held-out-4"])
# what it scored on first sight (2026-11-24, bench/results/failures.txt note 8): every miss came out unknown; kept as
# the record of that measurement
MEASURED_ON_FIRST_SIGHT_4 = 27  # of 37
MISSES_ON_FIRST_SIGHT_4 = {
    "data_error/verl-600-sft-question-column",
    "data_missing/llamafactory-6191-mllm-dome-json",
    "gpu_unavailable/model-angelo-60-slurm-no-gpu",
    "gpu_unavailable/ray-21097-actor-needs-gpu",
    "model_not_cached/open-webui-10950-offline-no-snapshot",
    "preempted/azureml-1242-low-priority-preempted",
    "reward_error/qwen-vl-finetune-234-accuracy-reward-arg",
    "reward_error/simple-grpo-13-math-verify-timeout",
    "time_limit/canu-444-lsf-runlimit",
    "time_limit/qiime-1048-pbs-walltime",
}


def test_the_fourth_set_is_fresh_and_real():
    sources = [excerpt.source for excerpt in HELD_OUT_4]
    assert len(HELD_OUT_4) == 37 and len(set(sources)) == len(sources)
    assert {excerpt.kind for excerpt in HELD_OUT_4} <= set(failures.KINDS)
    assert all(source.startswith("https://github.com/") for source in sources)
    assert not set(sources) & {excerpt.source for excerpt in [*EARLIER, *HELD_OUT_2, *HELD_OUT_3]}


# after tuning on its misses (note 9; tests/test_failures_heldout4_tuning.py): the three left are schedulers rlaunch
# never runs on, whose wording SLURM and Ray never print
TUNED_RIGHT_4 = 34  # of 37
TUNED_MISSES_4 = {
    "preempted/azureml-1242-low-priority-preempted": "unknown",  # Azure ML's PreemptionError
    "time_limit/canu-444-lsf-runlimit": "unknown",  # LSF's TERM_RUNLIMIT
    "time_limit/qiime-1048-pbs-walltime": "unknown",  # PBS/Torque's "walltime ... exceeded limit"
}


def test_the_fourth_spent_set_keeps_its_tuned_score_and_names_no_wrong_cause():
    result = score(HELD_OUT_4)
    misses = {name(excerpt): found for excerpt, found in result.rows if found != excerpt.kind}
    assert (result.right, result.total) == (TUNED_RIGHT_4, len(HELD_OUT_4))
    assert misses == TUNED_MISSES_4
    assert set(misses) <= MISSES_ON_FIRST_SIGHT_4, "tuning broke an excerpt that was right on first sight"
    assert TUNED_RIGHT_4 > MEASURED_ON_FIRST_SIGHT_4
    assert result.out_of_vocabulary_unknown == result.out_of_vocabulary == 4


OOV_4 = [excerpt for excerpt in HELD_OUT_4 if excerpt.kind == "unknown"]


@pytest.mark.parametrize("excerpt", OOV_4, ids=lambda excerpt: excerpt.path.stem)
def test_the_fourth_sets_out_of_vocabulary_failures_stay_unknown(excerpt: Excerpt) -> None:
    # device-side asserts, launch failures and NaN probabilities: CUDA at work, so nvidia-smi's rule cannot take them
    assert failures.classify(excerpt.text).kind == "unknown"


# --- the fifth set: collected blind while the fourth was tuned on, within rlaunch's stack; measured once (25/32), then
# tuned on: spent ------------------------------------------------------------------------------------------------------

HELD_OUT_5 = load_corpus(CORPORA["held-out-5"])
# what it scored on first sight (2026-11-24, bench/results/failures.txt note 10); kept as the record of that
# measurement
MEASURED_ON_FIRST_SIGHT_5 = 25  # of 32
MISSES_ON_FIRST_SIGHT_5 = {
    "config_error/open-instruct-620-hfargparser-unused-args": "unknown",
    "cuda_oom/nemo-rl-2871-logprob-chunk-ignored": "unknown",
    "gpu_unavailable/nemo-rl-89-not-enough-gpus": "unknown",
    "preempted/everyvoice-183-step-cancelled-preemption": "unknown",
    "ray_start_failed/ray-33842-gcs-wrong-redis-address": "unknown",
    "time_limit/phyloacc-81-sacct-timeout": "unknown",
    "unknown/verl-4157-rollout-correction-not-in-struct": "config_error",
}


def test_the_fifth_set_is_fresh_and_real():
    sources = [excerpt.source for excerpt in HELD_OUT_5]
    assert len(HELD_OUT_5) == 32 and len(set(sources)) == len(sources)
    assert {excerpt.kind for excerpt in HELD_OUT_5} <= set(failures.KINDS)
    assert all(source.startswith("https://github.com/") for source in sources)
    assert not set(sources) & {excerpt.source for excerpt in [*EARLIER, *HELD_OUT_2, *HELD_OUT_3, *HELD_OUT_4]}


# after tuning on its misses (note 11; tests/test_failures_heldout5_tuning.py): the one left shows only SLURM's
# cancel line without a reason, which scancel and a batch script's end print as well: no preemption evidence in the
# log. verl-4157 (labelled unknown: verl's own code sets a key its struct config lacks) now agrees with its label: a key
# set by code on a struct config is that code's bug, a key read that the config lacks stays a config error
TUNED_RIGHT_5 = 31  # of 32
TUNED_MISSES_5 = {"preempted/everyvoice-183-step-cancelled-preemption": "unknown"}


def test_the_fifth_spent_set_keeps_its_tuned_score_and_names_no_wrong_cause():
    result = score(HELD_OUT_5)
    misses = {name(excerpt): found for excerpt, found in result.rows if found != excerpt.kind}
    assert (result.right, result.total) == (TUNED_RIGHT_5, len(HELD_OUT_5))
    assert misses == TUNED_MISSES_5
    assert set(misses) <= set(MISSES_ON_FIRST_SIGHT_5), "tuning broke an excerpt that was right on first sight"
    assert TUNED_RIGHT_5 > MEASURED_ON_FIRST_SIGHT_5
    assert result.out_of_vocabulary_unknown == result.out_of_vocabulary == 5


OOV_5 = [excerpt for excerpt in HELD_OUT_5 if excerpt.kind == "unknown"]


@pytest.mark.parametrize("excerpt", OOV_5, ids=lambda excerpt: excerpt.path.stem)
def test_the_fifth_sets_out_of_vocabulary_failures_stay_unknown(excerpt: Excerpt) -> None:
    # verl-4157 among them: "not in struct" raised where verl's own code set the key, no override of the user's
    assert failures.classify(excerpt.text).kind == "unknown"


# --- the sixth set: collected blind while the fifth was tuned on, measured once (21/32), then tuned on: spent ---------

HELD_OUT_6 = load_corpus(CORPORA["held-out-6"])
# what it scored on first sight (2026-11-24, bench/results/failures.txt note 12); kept as the record of that
# measurement
MEASURED_ON_FIRST_SIGHT_6 = 21  # of 32
MISSES_ON_FIRST_SIGHT_6 = {
    "config_error/open-r1-249-grpo-num-generations-7-procs": "unknown",
    "data_error/openrlhf-875-openorca-parquet-fragment": "unknown",
    "data_missing/ray-25179-read-csv-relative-path-multinode": "unknown",
    "engine_memory/intel-arc-cookbook-4-v1-kv-cache-wrapped": "unknown",
    "engine_memory/sglang-7691-dp-profiled-negative-tokens": "unknown",
    "gpu_unavailable/openrlhf-233-llmrayactor-no-supported-device": "unknown",
    "host_oom/verl-agent-52-workerdict-sigkill-memory-monitor": "unknown",
    "model_not_cached/open-sora-427-rank0-network-unreachable-hub": "unknown",
    "ray_start_failed/ray-17365-slurm-pyxis-connect-aborted": "unknown",
    "ray_start_failed/ray-43778-slurm-empty-head-init-auto": "unknown",
    "unknown/ray-30119-local-uri-parquet-sample-task": "data_missing",
}


def test_the_sixth_set_is_fresh_and_real():
    sources = [excerpt.source for excerpt in HELD_OUT_6]
    assert len(HELD_OUT_6) == 32 and len(set(sources)) == len(sources)
    assert {excerpt.kind for excerpt in HELD_OUT_6} <= set(failures.KINDS)
    assert all(source.startswith("https://github.com/") for source in sources)
    earlier = [*EARLIER, *HELD_OUT_2, *HELD_OUT_3, *HELD_OUT_4, *HELD_OUT_5]
    assert not set(sources) & {excerpt.source for excerpt in earlier}


# after tuning on its misses (note 13; tests/test_failures_heldout6_tuning.py): the three left are logs that do not
# show the label's cause, and a rule that named it would have to read the thread, not the log
TUNED_RIGHT_6 = 30  # of 32; open-sora-427 named since note 27 (below)
TUNED_MISSES_6 = {
    # only Ray's list of possible causes of a vanished worker (the OOM killer, `ray stop --force`, a crash): the tuning
    # corpus holds the same message as unknown (verl-4921), held-out-3's openrlhf-187 was left the same way
    "host_oom/verl-agent-52-workerdict-sigkill-memory-monitor": "unknown",
    # (open-sora-427, urllib3's "Network is unreachable" with the Hub's URL cut, was left here until held-out-13 held a
    # second one of its kind, llamafactory-2497: since note 27 a no-route failure through Python's HTTP stack where
    # nothing names another host, W&B, a dataset reader or reward code is the Hub's)
    # a Ray Data bug by the thread; by its log a read task on another node could not open a parquet file, which is
    # what data_missing means (the fix says to put the file where every node reads it)
    "unknown/ray-30119-local-uri-parquet-sample-task": "data_missing",
}


def test_the_sixth_spent_set_keeps_its_tuned_score_and_names_no_new_wrong_cause():
    result = score(HELD_OUT_6)
    misses = {name(excerpt): found for excerpt, found in result.rows if found != excerpt.kind}
    assert (result.right, result.total) == (TUNED_RIGHT_6, len(HELD_OUT_6))
    assert misses == TUNED_MISSES_6
    assert misses.items() <= MISSES_ON_FIRST_SIGHT_6.items(), "tuning broke an excerpt that was right on first sight"
    assert TUNED_RIGHT_6 > MEASURED_ON_FIRST_SIGHT_6
    assert (result.out_of_vocabulary_unknown, result.out_of_vocabulary) == (4, 5)


OOV_6 = [excerpt for excerpt in HELD_OUT_6 if excerpt.kind == "unknown" and name(excerpt) not in TUNED_MISSES_6]


@pytest.mark.parametrize("excerpt", OOV_6, ids=lambda excerpt: excerpt.path.stem)
def test_the_sixth_sets_out_of_vocabulary_failures_stay_unknown(excerpt: Excerpt) -> None:
    # a raylet's failed check, workers dying before they register, NCCL's CUDA "invalid argument", flash-attn's
    # undefined symbol: no family added from the misses names them
    assert failures.classify(excerpt.text).kind == "unknown"


# --- the seventh and eighth sets: collected blind, measured once each, then tuned on (note 16): spent ---------------

HELD_OUT_7 = load_corpus(CORPORA["held-out-7"])
# what it scored on first sight (2026-11-24, bench/results/failures.txt note 14), kept as the record of that measurement
MEASURED_ON_FIRST_SIGHT_7 = 17  # of 23
# after tuning on its misses by families (note 16): the one left is TGI calling the Hub's tree API in offline mode with
# the model on disk (labelled unknown: a TGI bug, not a cache miss; the wording is the cache miss's own). Since note 27
# torch's store wait for a peer's key (a process group that never formed) is an nccl_timeout, as held-out-13 labelled
# it (vllm-ascend-2248), which names vllm-52907 too: its thread concluded a vLLM start-up deadlock, the same line
TUNED_RIGHT_7 = 21
VLLM_52907 = "unknown/vllm-52907-multinode-gloo-barrier-regression"
TUNED_MISSES_7 = {"unknown/tgi-3192-gaudi-offline-hub-tree-call": "model_not_cached", VLLM_52907: "nccl_timeout"}


def test_the_seventh_set_is_fresh_and_real():
    sources = [excerpt.source for excerpt in HELD_OUT_7]
    assert len(HELD_OUT_7) == 23 and len(set(sources)) == len(sources)
    assert {excerpt.kind for excerpt in HELD_OUT_7} <= set(failures.KINDS)
    assert all(source.startswith("https://github.com/") for source in sources)
    earlier = [*EARLIER, *HELD_OUT_2, *HELD_OUT_3, *HELD_OUT_4, *HELD_OUT_5, *HELD_OUT_6]
    assert not set(sources) & {excerpt.source for excerpt in earlier}


def test_the_seventh_set_keeps_its_tuned_score():
    result = score(HELD_OUT_7)
    misses = {name(excerpt): found for excerpt, found in result.rows if found != excerpt.kind}
    assert (result.right, misses) == (TUNED_RIGHT_7, TUNED_MISSES_7)
    assert TUNED_RIGHT_7 > MEASURED_ON_FIRST_SIGHT_7


HELD_OUT_8 = load_corpus(CORPORA["held-out-8"])
# what it scored on first sight (2026-11-25, note 15), kept as the record of that measurement
MEASURED_ON_FIRST_SIGHT_8 = 23  # of 27
TUNED_RIGHT_8 = 27  # after tuning on its misses (note 16)


def test_the_eighth_set_is_fresh_and_real():
    sources = [excerpt.source for excerpt in HELD_OUT_8]
    assert len(HELD_OUT_8) == 27 and len(set(sources)) == len(sources)
    assert {excerpt.kind for excerpt in HELD_OUT_8} <= set(failures.KINDS)
    assert all(source.startswith("https://github.com/") for source in sources)
    earlier = [*EARLIER, *HELD_OUT_2, *HELD_OUT_3, *HELD_OUT_4, *HELD_OUT_5, *HELD_OUT_6, *HELD_OUT_7]
    assert not set(sources) & {excerpt.source for excerpt in earlier}


def test_the_eighth_set_keeps_its_tuned_score():
    result = score(HELD_OUT_8)
    assert (result.right, result.total) == (TUNED_RIGHT_8, len(HELD_OUT_8))
    assert TUNED_RIGHT_8 > MEASURED_ON_FIRST_SIGHT_8


OOV_7_8 = [
    excerpt
    for excerpt in [*HELD_OUT_7, *HELD_OUT_8]
    if excerpt.kind == "unknown" and name(excerpt) not in TUNED_MISSES_7
]


@pytest.mark.parametrize("excerpt", OOV_7_8, ids=lambda excerpt: excerpt.path.stem)
def test_the_seventh_and_eighth_sets_out_of_vocabulary_failures_stay_unknown(excerpt: Excerpt) -> None:
    assert failures.classify(excerpt.text).kind == "unknown"


# --- the ninth set: collected blind while the seventh and eighth were tuned on, measured once, then tuned on --------

HELD_OUT_9 = load_corpus(CORPORA["held-out-9"])
# what it scored on first sight (2026-11-25, note 17), kept as the record of that measurement: the lowest of nine
MEASURED_ON_FIRST_SIGHT_9 = 16  # of 29
WRONGLY_NAMED_ON_FIRST_SIGHT_9 = {
    "cuda_oom/lmm-r1-43-vllm-wake-up-cumem-allocator-oom": "engine_memory",
    "unknown/trl-1726-ppo-under-fsdp-allgather-base-watchdog": "nccl_timeout",
}
# after tuning on its misses by families (note 18); each one left, and why its label is not what its log shows:
# open-instruct-592 a KeyError reading the data (the reporter's own conclusion was a misassigned reward model);
# lmm-r1-43 vLLM's sleep-mode allocator failing at wake-up, which README's table calls the engine's memory;
# orz-21 Ray's wrapper of an OutOfMemoryError cut before the message that says GPU or host (named since note 27:
# a worker's own code raised it, so torch's); ms-swift-5087 a debugger's
# rendering with the exception's name and message on separate lines; deepeyes-27 an OpenAI timeout with no frame or
# message naming reward code (a judge, an agent's tool or a data generator call the API alike); trl-1726 an NCCL
# watchdog timeout labelled unknown by its thread's conclusion. Then likeness.py's weights, trained on every spent set
# this one included, read two of them right where no signature matches (open-instruct-592, deepeyes-27): 25
TUNED_RIGHT_9 = 26  # orz-21 named since note 27 (Ray's wrapper of a worker's own OutOfMemoryError)
TUNED_MISSES_9 = {
    "cuda_oom/lmm-r1-43-vllm-wake-up-cumem-allocator-oom": "engine_memory",
    "data_error/ms-swift-5087-grpo-prepare-inputs-keyerror-prompt-debugger": "unknown",
    "unknown/trl-1726-ppo-under-fsdp-allgather-base-watchdog": "nccl_timeout",
}


def test_the_ninth_set_is_fresh_and_real():
    sources = [excerpt.source for excerpt in HELD_OUT_9]
    assert len(HELD_OUT_9) == 29 and len(set(sources)) == len(sources)
    assert {excerpt.kind for excerpt in HELD_OUT_9} <= set(failures.KINDS)
    assert all(source.startswith("https://github.com/") for source in sources)
    earlier = [*EARLIER, *HELD_OUT_2, *HELD_OUT_3, *HELD_OUT_4, *HELD_OUT_5, *HELD_OUT_6, *HELD_OUT_7, *HELD_OUT_8]
    assert not set(sources) & {excerpt.source for excerpt in earlier}


def test_the_ninth_set_keeps_its_tuned_score():
    result = score(HELD_OUT_9)
    misses = {name(excerpt): found for excerpt, found in result.rows if found != excerpt.kind}
    assert (result.right, misses) == (TUNED_RIGHT_9, TUNED_MISSES_9)
    assert TUNED_RIGHT_9 > MEASURED_ON_FIRST_SIGHT_9


OOV_9 = [excerpt for excerpt in HELD_OUT_9 if excerpt.kind == "unknown" and name(excerpt) not in TUNED_MISSES_9]


@pytest.mark.parametrize("excerpt", OOV_9, ids=lambda excerpt: excerpt.path.stem)
def test_the_ninth_sets_out_of_vocabulary_failures_stay_unknown(excerpt: Excerpt) -> None:
    assert failures.classify(excerpt.text).kind == "unknown"


# --- the tenth to twelfth sets: each collected blind while the one before it was tuned on, measured once (its first
# sight pinned here as the record of that measurement), then tuned on by families (its tuned score and the misses left)


@dataclass(frozen=True)
class SpentSet:
    name: str
    size: int
    first_sight: dict[str, str]  # the misses on first sight: excerpt -> kind found
    tuned_misses: dict[str, str]  # the misses left after tuning, each explained where it is listed

    @property
    def measured_on_first_sight(self) -> int:
        return self.size - len(self.first_sight)


GPUSTACK_5181 = "ray_start_failed/gpustack-5181-worker-node-ray-never-joined-placement-group-4-gpus-1800s"
ENGINE_WAKE_UP_575 = "engine_memory/verl-575-vllm-wake-up-oom-after-empty-cache-removed-frames"
ROLL_80 = "host_oom/roll-80-qwenvl-actor-infer-died-vllm-mm-preprocessor-cache-leak"
SIMPLEVLA_47 = "host_oom/simplevla-rl-47-verl-workerdict-died-host-memory-leak-480g"
MS_SWIFT_2399 = "unknown/ms-swift-2399-dpo-keyerror-prompt-trl-0-11-with-ms-swift-2-3"
LATER_SETS = [
    # note 20 (commit 124f0f1, 19/28), tuned in note 21 (tests/test_failures_heldout10_tuning.py); left: sglang-14092
    # SGLang's memory saver failing in cu_mem_create, which issue #26 and README's table call the engine's memory (its
    # collector labelled it a CUDA OOM); flow-grpo-232 urllib3's refused retries under frames that name no reward code
    # (the one that would is cut from the stored copy)
    SpentSet(
        "held-out-10",
        28,
        first_sight={
            "cuda_oom/sglang-14092-verl-resume-memory-occupation-cu-mem-create-oom": "engine_memory",
            "engine_memory/vllm-17939-v1-sampler-warmup-256-dummy-requests-oom": "cuda_oom",
            "host_oom/ray-28778-dask-large-scale-memory-monitor-actor-user-error-low-memory": "ray_node_lost",
            "model_not_cached/oellm-eval-58-leonardo-compute-node-cant-load-tokenizer-pythia": "unknown",
            "nccl_timeout/open-r1-658-grpo-math-verify-timeout-then-allgather-watchdog": "reward_error",
            "ray_node_lost/ray-49162-raylet-exits-dashboard-agent-failed-quoted": "unknown",
            "ray_start_failed/ray-10343-remote-raylet-grpc-bind-address-already-in-use-wrapped": "unknown",
            "ray_start_failed/ray-4393-workers-failed-to-connect-to-redis-interleaved-tracebacks": "unknown",
            "reward_error/flow-grpo-232-eval-reward-server-connection-refused-retries": "unknown",
        },
        tuned_misses={
            "cuda_oom/sglang-14092-verl-resume-memory-occupation-cu-mem-create-oom": "engine_memory",
            "reward_error/flow-grpo-232-eval-reward-server-connection-refused-retries": "unknown",
        },
    ),
    # note 22 (commit 3ffef4d, 15/26), tuned in note 23 (tests/test_failures_heldout11_tuning.py); left: anomalygpt-43
    # a rank killed by SIGKILL under DeepSpeed's launcher with no line saying who sent it (the thread concluded host
    # RAM; the log's fix says what decides it); gpustack-5181 vLLM's placement group short of GPUs, whose thread blames
    # a node whose Ray never joined (the log shows the shortage, not why)
    SpentSet(
        "held-out-11",
        26,
        first_sight={
            "config_error/prime-rl-721-sft-run-with-train-toml-validation-errors": "unknown",
            "data_error/llamafactory-9493-sft-cannot-find-valid-samples-after-dropping-empty-user-turns": "unknown",
            "data_missing/ray-33851-release-iter-tensor-batches-read-images-filenotfound-expand-paths": "unknown",
            "engine_memory/vllm-13882-rtx4060-8gib-kv-cache-minus-1.05gib-zero-cuda-blocks": "unknown",
            "host_oom/anomalygpt-43-deepspeed-launcher-sigkill-return-code-minus-9-host-ram": "unknown",
            "nccl_timeout/vllm-ascend-486-grpo-colocated-vllm-hcclallreduce-ei0006-socket-timeout": "unknown",
            "nccl_timeout/vlm-r1-257-grpo-nccl-heartbeat-watchdog-stuck-480s-wrapped": "unknown",
            GPUSTACK_5181: "gpu_unavailable",
            "ray_start_failed/ray-10704-redis-failed-to-start-then-raylet-socket-retries": "unknown",
            "ray_start_failed/ray-11201-university-cluster-raylet-socket-on-shared-fs-check-failure": "unknown",
            "unknown/instructlab-training-346-hub-model-id-opened-as-local-config-json": "data_missing",
        },
        tuned_misses={
            "host_oom/anomalygpt-43-deepspeed-launcher-sigkill-return-code-minus-9-host-ram": "unknown",
            GPUSTACK_5181: "gpu_unavailable",
        },
    ),
    # note 24 (commit 79377a8, 15/23), tuned in note 25 (tests/test_failures_heldout12_tuning.py); left: vllm-28143 a
    # torch OOM inside vLLM's engine core (the engine's memory by README's table; labelled cuda_oom); ray-40894 Ray's
    # vSphere provider short of GPU cards (a cloud provider rlaunch does not drive); chatglm2-6b-520 torchrun's
    # exitcode -9, a SIGKILL with nobody named (its fix says what decides)
    SpentSet(
        "held-out-12",
        23,
        first_sight={
            "cuda_oom/vllm-28143-engine-core-linear-weights-oom-896mib-gpu0-93gib": "engine_memory",
            "engine_memory/vllm-ascend-3843-qwen3-next-80b-910b4-tp8-available-memory-0": "unknown",
            "gpu_unavailable/maexp-1-marllib-ray-tune-asks-2-gpus-cluster-has-1": "unknown",
            "gpu_unavailable/ray-40894-vsphere-provider-no-unused-gpu-cards-for-head-node": "unknown",
            "gpu_unavailable/vllm-12983-ray-placement-group-no-gpu-on-driver-node": "unknown",
            "host_oom/chatglm2-6b-520-ptuning-torchrun-exitcode-minus-9-loading-checkpoint-shards": "unknown",
            "ray_start_failed/ray-24485-dashboard-agent-exits-loading-job-module-ray-cannot-start": "unknown",
            "ray_start_failed/ray-45041-ray-start-head-dashboard-exit-code-minus-11-docker": "unknown",
        },
        tuned_misses={
            "cuda_oom/vllm-28143-engine-core-linear-weights-oom-896mib-gpu0-93gib": "engine_memory",
            "gpu_unavailable/ray-40894-vsphere-provider-no-unused-gpu-cards-for-head-node": "unknown",
            "host_oom/chatglm2-6b-520-ptuning-torchrun-exitcode-minus-9-loading-checkpoint-shards": "unknown",
        },
    ),
    # note 26 (commit 07235d0, 12/20), tuned in note 27 (tests/test_failures_heldout13_tuning.py); left: verl-575 only
    # the frames into vLLM's wake_up, its OOM line cut; roll-80 and simplevla-rl-47 only Ray's list of guesses for a
    # vanished worker (held-out-12 labelled the same message unknown twice; the fix says what decides); ms-swift-2399
    # a `KeyError: 'prompt'` reading the data, whose thread blamed a trl version
    SpentSet(
        "held-out-13",
        20,
        first_sight={
            "cuda_oom/nemo-rl-3793-ppo-default-yaml-dtensor-get-logprobs-oom": "unknown",
            ENGINE_WAKE_UP_575: "unknown",
            ROLL_80: "unknown",
            SIMPLEVLA_47: "unknown",
            "model_not_cached/llamafactory-2497-phi-2-lora-save-checkpoint-fetches-hub-config-network-unreachable": (
                "unknown"
            ),
            "nccl_timeout/vllm-ascend-2248-deepseek-multi-node-gloo-pg-store-wait-timeout-1800000ms": "unknown",
            "time_limit/submitit-1775-slurm-array-subjob-timed-out-not-checkpointable": "unknown",
            MS_SWIFT_2399: "data_error",
        },
        tuned_misses={
            ENGINE_WAKE_UP_575: "unknown",
            ROLL_80: "unknown",
            SIMPLEVLA_47: "unknown",
            MS_SWIFT_2399: "data_error",
        },
    ),
]
FIRST_SIGHTS = {"held-out-10": 19, "held-out-11": 15, "held-out-12": 15, "held-out-13": 12}  # notes 20, 22, 24, 26
EARLIER_SETS = [*EARLIER, *HELD_OUT_2, *HELD_OUT_3, *HELD_OUT_4, *HELD_OUT_5, *HELD_OUT_6, *HELD_OUT_7, *HELD_OUT_8]


@pytest.mark.parametrize("spent", LATER_SETS, ids=lambda spent: spent.name)
def test_a_later_set_is_fresh_and_real(spent: SpentSet):
    excerpts = load_corpus(CORPORA[spent.name])
    sources = [excerpt.source for excerpt in excerpts]
    assert len(excerpts) == spent.size and len(set(sources)) == len(sources)
    assert {excerpt.kind for excerpt in excerpts} <= set(failures.KINDS)
    assert all(source.startswith("https://github.com/") for source in sources)
    before = [*EARLIER_SETS, *HELD_OUT_9]
    for earlier in LATER_SETS[: LATER_SETS.index(spent)]:
        before += load_corpus(CORPORA[earlier.name])
    assert not set(sources) & {excerpt.source for excerpt in before}, "a thread of an earlier corpus is not held out"


@pytest.mark.parametrize("spent", LATER_SETS, ids=lambda spent: spent.name)
def test_a_later_set_keeps_its_tuned_score(spent: SpentSet):
    result = score(load_corpus(CORPORA[spent.name]))
    misses = {name(excerpt): found for excerpt, found in result.rows if found != excerpt.kind}
    assert misses == spent.tuned_misses
    assert spent.measured_on_first_sight == FIRST_SIGHTS[spent.name] < result.right
    assert set(spent.tuned_misses) <= set(spent.first_sight)


OOV_LATER = [
    excerpt
    for spent in LATER_SETS
    for excerpt in load_corpus(CORPORA[spent.name])
    if excerpt.kind == "unknown" and name(excerpt) not in spent.tuned_misses
]


@pytest.mark.parametrize("excerpt", OOV_LATER, ids=lambda excerpt: excerpt.path.stem)
def test_a_later_sets_out_of_vocabulary_failures_stay_unknown(excerpt: Excerpt) -> None:
    assert failures.classify(excerpt.text).kind == "unknown"


def test_the_fourteenth_set_is_fresh_real_measured_once_and_not_trained_on():
    """held-out-14 comes from web pages (a forum, Ray's docs), not GitHub threads: its URLs are in no other corpus, its
    first sight is recorded, and neither a signature's test nor likeness.py's weights have used it."""
    import json

    excerpts = load_corpus(CORPORA["held-out-14"])
    sources = [excerpt.source for excerpt in excerpts]
    assert len(excerpts) == 2 and len(set(sources)) == len(sources)
    assert {excerpt.kind for excerpt in excerpts} <= set(failures.KINDS)
    assert all(source.startswith("https://") and "github.com" not in source for source in sources)
    others = {e.source for corpus, root in CORPORA.items() if corpus != "held-out-14" for e in load_corpus(root)}
    assert not set(sources) & others, "a page of an earlier corpus is not held out"
    assert "held-out-14" not in SPENT and "held-out-14" not in TRAINED_ON
    recorded = json.loads(FIRST_SIGHT.read_text())["held-out-14"]["kinds"]
    assert len(recorded) == len(excerpts)
