"""The one definition of a data source's domain: which of GURU's six reward domains scores a row, given its
`data_source`. Every part of rlaunch that groups by domain asks here (the scorer, PCGrad's tasks, RFT's filter,
the readiness check of the data, the sweep report).

Runs anywhere (login node, job head, Ray workers); pure Python, no imports beyond the standard library.
"""

from __future__ import annotations

# verl's own math sets, named without a domain prefix
MATH_SOURCES = ("openai/gsm8k", "lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500")


def domain_of(data_source: str) -> str:
    """GURU names data sources <domain>__<dataset>; verl's own math sets are plain names; anything else is its own
    (unknown) domain."""
    if "__" in data_source:
        return data_source.split("__", 1)[0]
    if data_source in MATH_SOURCES:
        return "math"
    return data_source
