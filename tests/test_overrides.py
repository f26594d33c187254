"""launch/overrides.py and launch/compose_once.py: a sweep composed once per combination of group choices equals
Hydra's full composition of every job (+, ++, ~, interpolations, packaged groups), and job names carry the profile
plus what the sweep varies."""

from __future__ import annotations

import json

import pytest
from conftest import CONF
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.types import OverrideType
from hydra.types import RunMode
from omegaconf import OmegaConf, open_dict

from launch.compose_once import ComposeOnce
from launch.errors import UserError
from launch.overrides import (
    as_written,
    hydra_quoted,
    job_name,
    key_in,
    key_of,
    keys_of,
    parse_one,
    swept_keys,
    value_in,
    value_text,
    without,
)
from launch.secret_guard import refuse_secret_overrides

COMMON = ["launch.sweep_id=test-sweep", "llm=qwen2_5_0_5b"]
# A mixed sweep: group choices (one of them packaged, one chosen through an interpolated default) varied with
# value overrides of every kind Hydra has.
JOBS = [
    [*COMMON, "gpu=a40", "algo=guru_baseline", "actor_rollout_ref.actor.optim.lr=1e-06"],
    [*COMMON, "gpu=a40", "algo=guru_baseline", "actor_rollout_ref.actor.optim.lr=3e-06"],
    [*COMMON, "gpu=h100", "algo=mtl_pcgrad", "+trainer.rlaunch_test_key=5", "~trainer.val_before_train"],
    [*COMMON, "gpu=h100", "algo=mtl_pcgrad", "++trainer.total_epochs=7", "++trainer.rlaunch_new={a: 1, b: [2, 3]}"],
    [*COMMON, "gpu=a40", "algo=guru_baseline", "trainer.experiment_name=${algo.name}-${gpu.name}-probe"],
    [*COMMON, "gpu=a40", "mode=quick_test", "data.train_batch_size=${actor_rollout_ref.actor.ppo_mini_batch_size}"],
    [*COMMON, "gpu=a40", "actor@actor_rollout_ref.actor=dp_actor", "actor_rollout_ref.actor.clip_ratio=0.3"],
    [*COMMON, "gpu=a40", "model_engine=dp", "actor_rollout_ref.actor.optim.lr=2e-06"],
    [*COMMON, "gpu=h100", "algo=mtl_pcgrad", "+algo.pcgrad.task_map.math__gsm8k=math", "cluster=slurm"],
    # values that interpolations read (absolutely; relatively: critic's ${.ppo_max_token_len_per_gpu}), a value of
    # another type (1.0 is 1 to Python, not in a config), and values nothing reads (the actor's namesake)
    [*COMMON, "gpu=a40", "algo=guru_baseline", "actor_rollout_ref.actor.ppo_mini_batch_size=32"],
    [*COMMON, "gpu=a40", "algo=guru_baseline", "critic.ppo_max_token_len_per_gpu=12345"],
    [*COMMON, "gpu=a40", "algo=guru_baseline", "trainer.total_epochs=1.0", "data.seed=7"],
    [*COMMON, "gpu=a40", "algo=guru_baseline", "gpu.name=renamed"],
    [*COMMON, "gpu=a40", "algo=guru_baseline", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=12345"],
]
# Jobs of JOBS whose resolution reuses their composition's (launch/overrides.py ResolvedBase) and jobs that must
# be resolved in full, because an interpolation reads what they change or they bring one.
REUSED = {0, 1, 2, 3, 8, 11, 13}
RESOLVED_IN_FULL = {4, 5, 9, 10, 12}


@pytest.fixture(scope="module")
def hydra_loader():
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        loader = GlobalHydra.instance().hydra.config_loader  # type: ignore[union-attr]
        master = loader.load_configuration("config", overrides=list(COMMON), run_mode=RunMode.MULTIRUN)
        yield loader, master


def full_composition(loader, master, overrides: list[str]):
    """What Hydra's own launchers compose for a job (Hydra's node dropped, as planning never reads it)."""
    cfg = loader.load_sweep_config(master, list(overrides))
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def test_compose_once_equals_full_composition_for_every_job(hydra_loader):
    """Job after job on the working copies the launcher lends, each changed in between as planning changes it."""
    loader, master = hydra_loader
    composer = ComposeOnce(loader, master)
    full_of = {tuple(overrides): full_composition(loader, master, overrides) for overrides in JOBS}  # never changed
    for overrides in [*JOBS, *JOBS]:  # twice: every working copy has been lent and put back before
        full = full_of[tuple(overrides)]
        with composer.job_config(overrides) as cfg:
            assert OmegaConf.to_yaml(cfg) == OmegaConf.to_yaml(full), overrides  # unresolved: interpolations kept
            assert OmegaConf.to_container(cfg, resolve=True) == OmegaConf.to_container(full, resolve=True), overrides
            # what plan.make_verl_config reads: equal in values, types and key order
            resolved = json.dumps(composer.resolve(cfg))
            assert resolved == json.dumps(OmegaConf.to_container(full, resolve=True)), overrides
            with open_dict(cfg):  # what planning may do: a preflight fix, a new key
                OmegaConf.update(cfg, "actor_rollout_ref.rollout.gpu_memory_utilization", 0.3, merge=False)
                OmegaConf.update(cfg, "trainer.rlaunch_planning_note", "x", merge=False)
    # a40/guru (7 jobs share it), h100/mtl (2), a40/quick_test, a40/dp_actor, a40/model_engine, h100/mtl/slurm;
    # h100/mtl composed again after each job that removes a key (~trainer.val_before_train), twice
    assert composer.compositions == 6 + 2


def test_resolution_is_reused_only_where_no_interpolation_reads_a_change(hydra_loader):
    loader, master = hydra_loader
    composer = ComposeOnce(loader, master)
    for index, overrides in enumerate(JOBS):
        if index not in REUSED | RESOLVED_IN_FULL:
            continue
        with composer.job_config(overrides) as cfg:
            reused = composer.pristine(cfg).resolve(OmegaConf.to_container(cfg, resolve=False))
            assert (reused is not None) == (index in REUSED), overrides


def test_value_overrides_do_not_leak_between_jobs(hydra_loader):
    loader, master = hydra_loader
    composer = ComposeOnce(loader, master)
    with composer.job_config([*COMMON, "gpu=a40", "+trainer.rlaunch_test_key=5", "~trainer.val_before_train"]) as cfg:
        assert cfg.trainer.rlaunch_test_key == 5 and "val_before_train" not in cfg.trainer
    with composer.job_config([*COMMON, "gpu=a40"]) as cfg:
        assert "rlaunch_test_key" not in cfg.trainer and "val_before_train" in cfg.trainer
    assert composer.compositions == 2  # a job that removed a key leaves its composition to be composed again


def test_a_bad_value_override_fails_as_in_hydra_and_spoils_nothing(hydra_loader):
    loader, master = hydra_loader
    composer = ComposeOnce(loader, master)
    bad = [*COMMON, "gpu=a40", "trainer.total_epochs=9", "trainer.no_such_key=1"]
    with pytest.raises(Exception, match="Could not override 'trainer.no_such_key'") as once:
        with composer.job_config(bad):
            pass
    with pytest.raises(Exception) as full:
        loader.load_sweep_config(master, bad)
    assert type(once.value) is type(full.value)
    good = [*COMMON, "gpu=a40"]
    with composer.job_config(good) as cfg:
        assert OmegaConf.to_yaml(cfg) == OmegaConf.to_yaml(full_composition(loader, master, good))


def test_swept_keys_are_those_whose_value_varies():
    jobs = [["gpu=a40", "algo=x", "a.b=1"], ["gpu=h100", "algo=x", "a.b=2"]]
    assert swept_keys(jobs) == {"gpu": {"a40", "h100"}, "a.b": {"1", "2"}}
    assert swept_keys([["gpu=a40", "a.b=1"]]) == {}


def test_swept_paths_with_the_same_file_name_get_names_that_tell_them_apart():
    train = "data.train_files"
    jobs = [[f"{train}=/d/gsm8k/train.parquet"], [f"{train}=/d/math/train.parquet"], [f"{train}=/e/x.parquet"]]
    swept = swept_keys(jobs)
    names = [job_name("a40", job, swept, frozenset()) for job in jobs]
    assert names == [
        "a40,train_files=gsm8k/train.parquet",
        "a40,train_files=math/train.parquet",
        "a40,train_files=x.parquet",
    ]
    # one path the end of another: the longer one keeps the component that tells it apart
    nested = swept_keys([[f"{train}=/a/train.parquet"], [f"{train}=/b/a/train.parquet"]])
    assert job_name("a40", [f"{train}=/b/a/train.parquet"], nested, frozenset()) == "a40,train_files=b/a/train.parquet"


def test_job_name_is_profile_plus_swept_values():
    overrides = ["gpu=h100", "algo=mtl_pcgrad", "actor_rollout_ref.actor.optim.lr=3e-06", "trainer.nnodes=2"]
    swept = frozenset({"gpu", "algo", "actor_rollout_ref.actor.optim.lr"})
    assert job_name("h100", overrides, swept, frozenset({"gpu", "algo"})) == "h100,mtl_pcgrad,lr=3e-06"
    assert job_name("a40", ["gpu=a40", "launch.dry_run=true"], frozenset(), frozenset({"gpu"})) == "a40"


def test_job_name_keeps_same_named_keys_apart_and_is_stable():
    overrides = [
        "actor_rollout_ref.actor.optim.lr=1e-06",
        "critic.optim.lr=2e-06",
        "actor_rollout_ref.actor.entropy_coeff=0.0",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
    ]
    swept = frozenset(keys_of(overrides))
    name = job_name("a40", overrides, swept, frozenset())
    assert name == ("a40,actor.optim.lr=1e-06,critic.optim.lr=2e-06,entropy_coeff=0.0,optimizer_offload=False")
    assert name == job_name("a40", overrides, swept, frozenset())
    path = ["actor_rollout_ref.model.path=/models/qwen-7b"]
    assert job_name("a40", path, frozenset({"actor_rollout_ref.model.path"}), frozenset()) == "a40,path=qwen-7b"


def test_job_name_stays_short():
    overrides = [f"trainer.key_{i}=value_{i}" for i in range(30)]
    name = job_name("a40", overrides, frozenset(keys_of(overrides)), frozenset())
    assert len(name) <= 100 and name.endswith(tuple(f",+{n}" for n in range(1, 30)))


# Where the hand parsers that read overrides before (partition("="), lstrip("+~")) and Hydra's grammar disagree:
# each case is read as Hydra reads it, since Hydra is what composes the run.
GRAMMAR = [
    # argument, key, value_text, Hydra's override type
    ("key='a=b'", "key", "a=b", OverrideType.CHANGE),  # by hand: the quote stayed in the value
    ("+key=v", "key", "v", OverrideType.ADD),
    ("++key=v", "key", "v", OverrideType.FORCE_ADD),
    ("~key", "key", None, OverrideType.DEL),
    ("~key=3", "key", None, OverrideType.DEL),  # deletes key (if it is 3): sets nothing
    ("key=[a,b]", "key", "[a,b]", OverrideType.CHANGE),
    ("key=a,b", "key", "a,b", OverrideType.CHANGE),  # a sweep, as written
    ("cluster.partition=null", "cluster.partition", "null", OverrideType.CHANGE),
    ("cluster.address='http://head:8265'", "cluster.address", "http://head:8265", OverrideType.CHANGE),
    ("gpu.selected_by='it\\'s a=b, c'", "gpu.selected_by", "it's a=b, c", OverrideType.CHANGE),
]


@pytest.mark.parametrize(("argument", "key", "text", "kind"), GRAMMAR)
def test_an_override_is_read_by_hydras_grammar(argument: str, key: str, text: str | None, kind: OverrideType):
    parsed = parse_one(argument)
    assert parsed is not None and parsed.type == kind
    assert key_of(parsed) == key_in(argument) == key
    assert value_text(parsed) == text == value_in(["-m", argument], key)


def test_what_hydra_cannot_read_is_no_override():
    for argument in ("-m", "--cfg", "job", "k=a=b", "k='unterminated", "WANDB_API_KEY"):
        assert parse_one(argument) is None and key_in(argument) is None
    assert without(["-m", "cluster=slurm", "+cluster.x=1", "--cfg", "job", "gpu=a40"], {"cluster"}) == [
        "-m",
        "+cluster.x=1",
        "--cfg",
        "job",
        "gpu=a40",
    ]
    assert without(["+cluster=slurm", "~cluster", "cluster.partition=a"], {"cluster"}) == ["cluster.partition=a"]


def test_values_as_written_keep_their_quotes():
    assert as_written(["a.b=0.5", "+c.d='x=y'", "~e.f", "g=[1,2]"]) == {"a.b": "0.5", "c.d": "'x=y'", "g": "[1,2]"}
    assert keys_of(["a.b=0.5", "+c.d='x=y'", "~e.f", "++g@pkg=1"]) == {"a.b", "c.d", "e.f", "g@pkg"}


@pytest.mark.parametrize(
    "text",
    ["plain", "c[1-2]", "a,b", "x=y", "it's", "back\\slash", "end\\", "q\\'", "a\\\\'b", "sp ace", "${oc.env:X}", ""],
)
def test_hydra_quoted_reads_back_as_the_same_string(text: str):
    parsed = parse_one(f"key={hydra_quoted(text)}")
    assert parsed is not None and parsed.value() == text


def test_secret_guard_reads_keys_as_hydra_does():
    secret = "s3cr3t-value-123"
    env = {"HF_TOKEN": secret}
    for argument in (
        "+cluster.env.WANDB_API_KEY=abc",
        "++cluster.env.HF_TOKEN='x=y'",
        "~cluster.env.HF_TOKEN",
        f"trainer.experiment_name='run {secret}'",
        f"trainer.experiment_name=[a,{secret}]",
        f"k={secret}=x",  # Hydra cannot read it: the secret value is still refused
    ):
        with pytest.raises(UserError, match="secret on the command line") as refused:
            refuse_secret_overrides([argument], env)
        assert secret not in str(refused.value)
    # not a secret by name or value: passed on (what Hydra cannot read, Hydra refuses with its own message)
    refuse_secret_overrides(["trainer.experiment_name='MY_TOKEN=1'", "-m", "k=a=b", "a.token_budget=3"], env)
