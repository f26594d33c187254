"""Ray's own disk-full wording (its file system monitor, src/ray/common/file_system_monitor.cc: `<path> is over 95%
full, available space: ... GB; capacity: ... GB. Object creation will fail if spilling is required.`) is disk_full,
with the directory named in the fix; it had come out unknown with the OOM killer's advice (EasyR1#300)."""

from __future__ import annotations

from pathlib import Path

import pytest

from launch.report import failures

CORPUS = Path(__file__).parent / "data" / "failures"

# EasyR1#300 (github.com/hiyouga/EasyR1/issues/300): a worker died after Ray's session directory filled its disk
EASYR1_300 = """\
(raylet) [2025-05-19 05:02:11,101 E 976512 976512] (raylet) file_system_monitor.cc:116: /tmp/ray/session_2025-05-19_04-19-55_287964_976346 is over 95% full, available space: 2.03779 GB; capacity: 69.9336 GB. Object creation will fail if spilling is required.
(WorkerDict pid=1009098) /lib64/libc.so.6(+0x10ee20) [0x7f751b10ee20] __GI___clone3
ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
        class_name: create_colocated_worker_cls.<locals>.WorkerDict
        ip: 172.23.166.108
The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage.
"""  # noqa: E501


def test_rays_disk_monitor_on_its_session_directory_is_disk_full():
    failure = failures.classify(EASYR1_300)
    assert failure.kind == "disk_full", failure
    assert "is over 95% full" in failure.evidence[0]
    assert failure.fix.startswith(
        "Ray's session directory (/tmp/ray/session_2025-05-19_04-19-55_287964_976346) is on a full disk"
    ), failure.fix
    assert "OOM killer" not in failure.fix and "dmesg" not in failure.fix


@pytest.mark.parametrize(
    ("line", "where"),
    [
        # the same monitor on a spilling directory (ray.init(_system_config={"object_spilling_config": ...}))
        (
            "(raylet) file_system_monitor.cc:116: /mnt/spill is over 90% full, available space: 1.2 GB; capacity: "
            "12 GB. Object creation will fail if spilling is required.",
            "Ray's spilling directory /mnt/spill is on a full disk",
        ),
        (
            "(raylet) file_system_monitor.cc:104: /tmp/ray/session_2026-01-02_03-04-05_1_2 has no capacity, object "
            "creation will fail if spilling is required.",
            "Ray's session directory (/tmp/ray/session_2026-01-02_03-04-05_1_2) is on a full disk",
        ),
    ],
)
def test_rays_disk_monitor_in_its_other_forms(line: str, where: str):
    failure = failures.classify(line + "\nray.exceptions.ActorDiedError: The actor died unexpectedly\n")
    assert failure.kind == "disk_full" and failure.fix.startswith(where), failure


@pytest.mark.parametrize(
    ("kind", "name"),
    [("host_oom", "ray-40568-small-victim"), ("cuda_oom", None)],
)
def test_look_alikes_keep_their_kind(kind: str, name: str | None):
    """A full object store (memory, not disk) and a node's memory monitor past its threshold read like 'over 95%
    full' but are not the disk: each log keeps its kind."""
    look_alikes = (
        "(raylet) Object store is over 95% full: 9.5 GB of 10 GB used; objects will be spilled to disk\n"
        "WARNING: the GPU memory of this node is over 95% full, available space: 1.1 GB of 80 GB\n"
    )
    if name is not None:
        text = (CORPUS / kind / f"{name}.log").read_text()
        text = "\n".join(line for line in text.splitlines() if not line.startswith("# source:"))
    else:
        text = (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 1.2 GiB is free.\n"
        )
    assert failures.classify(look_alikes + text).kind == kind
