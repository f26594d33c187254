"""Talking to a standing Ray cluster's head (cluster=ray) over its dashboard: the client, its token header, and the one
line that says why the cluster could not be used.

Runs on: the login node or a laptop (facts, submission, sweep status/logs/cancel). Imports Ray lazily.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from launch.errors import UserError


def auth_headers(token_file: str | None) -> dict[str, str]:
    """The cluster's token as an HTTP header, read from its file for each client (Ray fixes its own auth mode when it
    is first imported, which may have happened before this run chose a cluster)."""
    if not token_file:
        return {}
    if not (Path(token_file).is_file() and os.access(token_file, os.R_OK)):
        raise UserError(
            f"cluster.ray_auth_token_file={token_file}: no readable file there; point it at the Ray cluster's token"
        )
    return {"Authorization": f"Bearer {Path(token_file).read_text().strip()}"}


def refusal(address: str, error: Exception, token_file: str | None = None) -> UserError:
    """What went wrong reaching the cluster, with the fix: a token the cluster wants, or rejected (the file given
    holds another cluster's, or an old one), or a head without its dashboard."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if "uthenticat" not in str(error) and "Unauthorized" not in str(error):
        hint = "start the head with its dashboard (ray start --head --include-dashboard=true) or fix cluster.address"
    elif token_file:
        hint = (
            f"it rejected the token in cluster.ray_auth_token_file={token_file}: point it at this cluster's current "
            "token (the head's, which `ray start` rewrites when the cluster restarts)"
        )
    else:
        hint = "set cluster.ray_auth_token_file to the cluster's token"
    return UserError(f"cannot use the Ray cluster at {address}: {first[:300]}; {hint}")


def connect(address: str, token_file: str | None) -> Any:
    """A JobSubmissionClient for the cluster's dashboard."""
    from ray.job_submission import JobSubmissionClient

    headers = auth_headers(token_file)
    try:
        return JobSubmissionClient(address, headers=headers)
    except Exception as error:  # ConnectionError, AuthenticationError, ValueError for a bad address
        raise refusal(address, error, token_file) from None


def alive_node_totals(address: str, token_file: str | None) -> list[dict[str, float]]:
    """Each alive node's total resources, as Ray's state API reports them (CPU, GPU, memory, accelerator_type:X)."""
    from ray.util.state import StateApiClient
    from ray.util.state.common import ListApiOptions, StateResource

    headers = {"Content-Type": "application/json", **auth_headers(token_file)}
    try:
        client = StateApiClient(address=address, headers=headers)
        listed = client.list(StateResource.NODES, options=ListApiOptions(detail=True), raise_on_missing_output=False)
    except Exception as error:
        raise refusal(address, error, token_file) from None
    return [node.resources_total or {} for node in listed if node.state == "ALIVE"]
