"""The seams launch/compose_once.py and launch/parse_once.py reach inside Hydra and OmegaConf through: each test fails
when a new version of either moves what they rely on (then the module needs a look, not a silent slowdown or a wrong
composition)."""

from __future__ import annotations

import inspect

import omegaconf.base
import pytest
from conftest import CONF
from hydra import initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import CachingConfigRepository
from hydra.core.global_hydra import GlobalHydra
from hydra.plugins.config_source import ConfigResult
from omegaconf import OmegaConf

from launch.compose_once import CopiedOnRead, SharedConfigCache


def test_omegaconf_parses_interpolations_and_yaml_through_what_parse_once_caches(tmp_path):
    """launch/parse_once.py's seams (importing launch installed it): omegaconf resolves `${...}` through
    omegaconf.base.parse and loads YAML with the loader omegaconf._utils.get_yaml_loader returns."""
    import launch  # noqa: F401 - installs the caches
    from launch import parse_once

    cached = omegaconf.base.parse
    assert hasattr(cached, "cache_info")
    cfg = OmegaConf.create({"a": 1, "b": "${a}", "c": "${a}", "d": "x-${b}"})
    hits = cached.cache_info().hits
    assert OmegaConf.to_container(cfg, resolve=True) == {"a": 1, "b": 1, "c": 1, "d": "x-1"}
    assert cached.cache_info().hits > hits, cached.cache_info()  # `${a}` parsed once for b and c: the seam is live
    path = tmp_path / "node.yaml"
    path.write_text("x: 1\ny:\n  - a\n  - ${x}\n")
    first = OmegaConf.load(path)
    assert path.read_text() in parse_once._parsed_yaml  # loaded through the caching loader
    first.y.append("changed")  # a caller's change reaches no later load: each gets its own copy
    assert OmegaConf.to_container(OmegaConf.load(path), resolve=True) == {"x": 1, "y": ["a", 1]}
    with pytest.raises(Exception, match="duplicate key"):  # omegaconf's own loader still refuses what it refused
        OmegaConf.create("k: 1\nk: 2\n")


def test_hydras_loader_offers_what_compose_once_calls():
    assert list(inspect.signature(ConfigLoaderImpl._apply_overrides_to_config).parameters) == ["overrides", "cfg"]
    assert "config_name" in inspect.signature(ConfigLoaderImpl._parse_overrides_and_create_caching_repo).parameters
    assert list(inspect.signature(ConfigLoaderImpl.load_sweep_config).parameters)[1:] == [
        "master_config",
        "sweep_overrides",
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        loader = GlobalHydra.instance().hydra.config_loader  # type: ignore[union-attr]
        shared = SharedConfigCache(loader.repository)  # Hydra's caching wrapper around the loader's repository
        assert isinstance(shared, CachingConfigRepository) and hasattr(shared, "delegate")
        loaded = loader.repository.load_config("config")
        assert isinstance(shared.load_config("config"), CopiedOnRead)
    # CopiedOnRead mirrors every field of Hydra's ConfigResult
    assert {field for field in ConfigResult.__dataclass_fields__} == {
        "provider",
        "path",
        "header",
        "defaults_list",
        "is_schema_source",
        "config",
    }
    assert OmegaConf.to_container(CopiedOnRead(loaded).config) == OmegaConf.to_container(loaded.config)


@pytest.mark.parametrize(
    "overrides",
    [[], ["gpu=a40"], ["hydra.mode=MULTIRUN"], ["gpu=a40", "++hydra.mode=RUN"], ["hydra.mode=SIDEWAYS"]],
)
def test_the_run_mode_read_from_the_command_line_is_the_one_hydra_composes(overrides: list[str]):
    """launch/run.py skips Hydra's get_mode composition (compose_once.mode_from_overrides): it must return what
    Hydra's own get_mode returns, which holds only while rlaunch's conf sets no hydra.mode."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.types import RunMode

    from launch.compose_once import mode_from_overrides
    from launch.run import register_help_resolver, register_schemas

    register_schemas()
    register_help_resolver()

    GlobalHydra.instance().clear()
    hydra = Hydra.create_main_hydra2("rlaunch", create_config_search_path(str(CONF)))
    try:
        expected = hydra.get_mode("config", list(overrides))
        assert mode_from_overrides(hydra, "config", list(overrides)) == expected
        # Hydra's own really composed: the mode it read is the command line's
        typed = overrides[-1].rpartition("=")[2] if overrides else ""
        assert expected == {"MULTIRUN": RunMode.MULTIRUN, "RUN": RunMode.RUN}.get(typed)
    finally:
        GlobalHydra.instance().clear()
