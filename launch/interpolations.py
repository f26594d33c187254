"""One parse per distinct interpolation string.

OmegaConf parses an interpolation (`${...}`) with ANTLR's pure-Python parser every time it resolves one, about a
millisecond each. verl's config holds a few hundred distinct ones, resolved tens of thousands of times while
rlaunch composes, plans and judges a run (a fit table: 7909 parses, a quarter of its time). A parse tree is only
read after it is built (omegaconf's GrammarVisitor walks it; its tokens keep their own input stream, not the
parser's), so one tree per (string, rule, mode) serves every resolution. A string that fails to parse raises each
time, as before (lru_cache keeps no exception). RLAUNCH_INTERPOLATION_CACHE=off leaves omegaconf as it is (bench/plan.py
measures both).

Runs on: every process that imports launch (launch/__init__.py installs it).
"""

from __future__ import annotations

import functools
import os

from omegaconf import _utils, base, grammar_parser
from omegaconf.resolvers import oc

# omegaconf 2.3's modules that imported `parse` by name, each holding its own reference
_IMPORTERS = (grammar_parser, base, _utils, oc)


def install() -> None:
    if hasattr(grammar_parser.parse, "cache_info") or os.environ.get("RLAUNCH_INTERPOLATION_CACHE") == "off":
        return
    original = grammar_parser.parse
    cached = functools.lru_cache(maxsize=8192)(original)
    for module in _IMPORTERS:
        if getattr(module, "parse", None) is original:
            module.parse = cached  # type: ignore[attr-defined]
