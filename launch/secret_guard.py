"""Keys and tokens stay in the environment: they reach the job through the environment SLURM propagates
(sbatch's default --export=ALL) and verl's Ray workers through the raylet that inherits it, never through a file.

Runs on: the login node (refusing secrets on the command line or in cluster.env before Hydra writes .hydra/ and before
anything is planned) and inside the job (copying Ray's logs into the run directory with any secret value masked).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from launch.errors import UserError

SECRET_NAME = re.compile(r"(API_KEY|_TOKEN|_SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
MIN_SECRET_LENGTH = 8  # shorter values ("1", "true") would mask half the log
MASK = "<redacted>"


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of this environment's secret-named variables, longest first (so no key is half-masked)."""
    environ = os.environ if environ is None else environ
    values = {value for name, value in environ.items() if is_secret_name(name) and len(value) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def redact(text: str, values: Iterable[str]) -> str:
    for value in values:
        text = text.replace(value, MASK)
    return text


def refuse_secret_overrides(overrides: Iterable[str], environ: Mapping[str, str] | None = None) -> None:
    """A key on the command line would be written to .hydra/overrides.yaml, the plan and the sbatch script."""
    from launch.overrides import key_in  # Hydra's parser: only the login node needs it, not the job's Ray bring-up

    values = secret_values(environ)
    for override in overrides:
        # An override Hydra cannot read is refused by Hydra before it writes anything; a secret value in it is
        # still refused here, so that it is not echoed back in Hydra's message either.
        key = key_in(override)
        name = (key or "").rsplit(".", 1)[-1]
        if is_secret_name(name) or any(secret in override for secret in values):
            named = key if key and not any(secret in key for secret in values) else "an override"
            raise UserError(
                f"{named}: a secret on the command line would be written into the run directory and the sbatch script; "
                f"export {name if is_secret_name(name) else 'it'} in your shell instead (SLURM passes the "
                "environment to the job, and verl's Ray workers inherit it)"
            )


def refuse_secret_env(env: Mapping[str, object]) -> None:
    """cluster.env goes into the sbatch script and verl's runtime env (which verl prints): no secrets there."""
    for name in env:
        if is_secret_name(str(name)):
            raise UserError(
                f"cluster.env.{name}: a secret in cluster.env would be written into the sbatch script and the run's "
                f"config; remove it and export {name} in your shell (SLURM passes the environment to the job)"
            )


def copy_redacted(source: Path, target: Path, values: list[str]) -> None:
    """Copy a tree, masking secret values in every file that decodes as text (binary files are copied as they
    are: Ray writes none that holds the environment)."""
    for path in source.rglob("*"):
        destination = target / path.relative_to(source)
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
            continue
        if not path.is_file():  # dangling symlinks, sockets
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = path.read_bytes()
        except OSError:  # removed while copying (Ray rotates and cleans up its files)
            continue
        if values:
            try:
                data = redact(data.decode(), values).encode()
            except UnicodeDecodeError:
                pass
        destination.write_bytes(data)
