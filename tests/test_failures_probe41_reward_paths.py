"""A scorer raising in a user's reward file (helper-41's probe, case c4raise): its fix names the file by the absolute
path the node ran, not a path cut to its last two parts or rlaunch's rewards/."""

from __future__ import annotations

from launch.report import failures

# c4raise's job log (submitit/<job>/<job>_0_log.err), frames between Ray's header and the scorer left out
SCORER_RAISED = "\n".join(
    [
        "ray.exceptions.RayTaskError(ValueError): ray::RewardLoopWorker.compute_score_batch() (pid=22217, "
        "ip=127.132.0.11, actor_id=ca620b3c04bedbe125db782b02000000)",
        '  File "/work/main/.venv/lib/python3.11/site-packages/verl/experimental/reward_loop/reward_loop.py", '
        "line 148, in compute_score",
        '  File "/tmp/h41/rw/raises.py", line 2, in compute_score',
        '    raise ValueError(f"probe reward cannot score {data_source}")',
        "ValueError: probe reward cannot score math__deepscaler",
    ]
)


def test_a_users_reward_file_is_named_by_its_absolute_path_and_line():
    failure = failures.classify(SCORER_RAISED)
    assert failure.kind == "reward_error"
    assert failure.fix.startswith("the reward function raised in /tmp/h41/rw/raises.py:2 (compute_score)")
    assert "rewards/" not in failure.fix
    assert failure.fix.endswith("(the file reward.custom_reward_function.path names)")


def test_a_library_scorer_keeps_its_package_relative_name():
    in_verl = SCORER_RAISED.replace("/tmp/h41/rw/raises.py", "/opt/verl/verl/utils/reward_score/math.py")
    assert failures.classify(in_verl).fix.startswith(
        "the reward function raised in reward_score/math.py (compute_score)"
    )
