"""The two seams launch/compose_once.py reaches inside Hydra and OmegaConf through: each test fails when a new
version of either moves what the sweep planner relies on (then launch/compose_once.py needs a look, not a silent
slowdown or a wrong composition)."""

from __future__ import annotations

import inspect

import omegaconf.base
from conftest import CONF
from hydra import initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import CachingConfigRepository
from hydra.core.global_hydra import GlobalHydra
from hydra.plugins.config_source import ConfigResult
from omegaconf import OmegaConf

from launch.compose_once import CopiedOnRead, SharedConfigCache, interpolations_parsed_once


def test_omegaconf_resolves_interpolations_through_the_parse_function_that_is_cached():
    original = omegaconf.base.parse
    cfg = OmegaConf.create({"a": 1, "b": "${a}", "c": "${a}", "d": "x-${b}"})
    with interpolations_parsed_once():
        cached = omegaconf.base.parse
        assert cached is not original and hasattr(cached, "cache_info")
        assert OmegaConf.to_container(cfg, resolve=True) == {"a": 1, "b": 1, "c": 1, "d": "x-1"}
        # OmegaConf parsed `${a}` once for b and c: it calls omegaconf.base.parse, the seam is live
        assert cached.cache_info().hits >= 1, cached.cache_info()
    assert omegaconf.base.parse is original


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
