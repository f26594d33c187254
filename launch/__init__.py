"""rlaunch's launcher: the pipeline from a command line to a running verl job and back (README, "How a run is put
together"). Each module's docstring says where it runs and what it owns. Depends on algos/ and rewards/, never the
reverse."""
