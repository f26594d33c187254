"""What reads finished (or running) runs back and reports on them: compare.py (a sweep's runs side by side) and
doctor.py (what holds each run back, and why a failed attempt failed).

Runs on: any machine that sees the run directories (login node, a laptop with the shared filesystem); never in the
job. They read what the job and the plan recorded (launch/rundir.py; metrics.py: verl's metric files; failures/:
why an attempt failed) and recompute nothing the plan already decided.
"""
