"""Resumable stages: each stage's directory records the configuration it was run with, as a hash chained through
the stages before it, so a stage is skipped when its output exists for the same configuration, and a changed
configuration reruns that stage and every stage after it.

Runs on: the job head (the pipeline) and tests. A requeued job (preemption, time limit) calls the pipeline again:
finished stages are skipped, an unfinished stage with the same hash keeps its directory (verl's SFT trainer resumes
from the checkpoints in it), and a stage whose configuration changed starts from an empty directory.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STAGE_ORDER = ("generate", "filter", "sft")
CONFIG_FILE = "stage_config.json"  # written when the stage starts: the hash and the configuration behind it
DONE_FILE = "done.json"  # written when the stage succeeded: the hash and a summary


def config_hash(stage: str, config: dict[str, Any], upstream_hash: str) -> str:
    text = json.dumps({"stage": stage, "upstream": upstream_hash, "config": config}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_identity(path: str | Path) -> dict[str, Any]:
    """Enough to notice that an input file was replaced, without reading it (training sets are large)."""
    resolved = Path(path).expanduser()
    if not resolved.exists():
        return {"path": str(path), "exists": False}
    stat = resolved.stat()
    return {"path": str(resolved), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


@dataclass
class Stage:
    """One stage of one run: its directory, its configuration and the outputs that must exist once it is done."""

    name: str
    directory: Path
    config: dict[str, Any]
    upstream_hash: str = ""
    outputs: tuple[str, ...] = ()  # file names inside `directory`
    extra_directories: tuple[Path, ...] = ()  # also the stage's own, cleared with it (the SFT checkpoints)
    hash: str = field(init=False)

    def __post_init__(self) -> None:
        self.hash = config_hash(self.name, self.config, self.upstream_hash)

    def output(self, name: str) -> Path:
        return self.directory / name

    def is_done(self) -> bool:
        done = self.directory / DONE_FILE
        if not done.exists():
            return False
        try:
            recorded = json.loads(done.read_text()).get("config_hash")
        except (OSError, json.JSONDecodeError):
            return False
        return recorded == self.hash and all((self.directory / name).exists() for name in self.outputs)

    def recorded_hash(self) -> str | None:
        path = self.directory / CONFIG_FILE
        try:
            return json.loads(path.read_text()).get("config_hash") if path.exists() else None
        except (OSError, json.JSONDecodeError):
            return None

    def prepare(self) -> bool:
        """Make the directory ready to run this configuration. Returns True when an unfinished attempt with the same
        configuration is continued (its files are kept), False when the stage starts from an empty directory."""
        continued = self.recorded_hash() == self.hash
        if not continued:
            # another configuration's files (or a crash before the config was recorded): never mixed with ours
            for directory in (self.directory, *self.extra_directories):
                shutil.rmtree(directory, ignore_errors=True)
        (self.directory / DONE_FILE).unlink(missing_ok=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        record = {"stage": self.name, "config_hash": self.hash, "upstream_hash": self.upstream_hash}
        (self.directory / CONFIG_FILE).write_text(json.dumps({**record, "config": self.config}, indent=2, default=str))
        return continued

    def finish(self, summary: dict[str, Any]) -> None:
        missing = [name for name in self.outputs if not (self.directory / name).exists()]
        if missing:
            raise RuntimeError(
                f"stage {self.name} ended without its output(s) {', '.join(missing)} in {self.directory}"
            )
        record = {"config_hash": self.hash, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "summary": summary}
        (self.directory / DONE_FILE).write_text(json.dumps(record, indent=2, default=str))
