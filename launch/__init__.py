"""rlaunch's launcher: the pipeline from a command line to a running verl job and back (README, "How a run is put
together"). Depends on algos/ and rewards/, never the reverse.

Runs on: the login node (planning, submitting, reports) and in the job (job.py, ray_cluster.py); each module's
docstring says where it runs and what it owns.
"""

from launch.parse_once import install as _parse_once

_parse_once()
