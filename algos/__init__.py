"""Multi-task algorithms that plug into verl without forking it.

`pcgrad` is the method alone (pure torch), `sharded` applies it to FSDP gradient shards with one all-reduce, and
`verl_plugin` is what verl imports through its `verl.plugins` entry point group; `tasks` says which task a sample
belongs to (its data source's domain, rewards/sources.py); `rft/` is the rejection-sampling pipeline.

Runs in: verl's driver and its Ray workers (the plugin, the PCGrad step), the job head (rft's pipeline) and, for
plan-time checks the launcher asks for (rft's validation), the login node. Nothing here imports the launcher
(tests/test_layering.py checks it, imports inside functions included).
"""
