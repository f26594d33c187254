"""One module per GURU domain: `prepare` (find the answer, build the task) and `grade` (judge it).

Runs in: `prepare` in the scorer (verl's reward worker); `grade` in the pool's worker processes (stem: the HTTP
judge's threads in the reward worker).
"""
