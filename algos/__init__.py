"""Multi-task algorithms that plug into verl without forking it.

`pcgrad` is the method alone (pure torch), `sharded` applies it to FSDP gradient shards with one all-reduce, and
`verl_plugin` is what verl imports through its `verl.plugins` entry point group. Nothing here imports the launcher.
"""
