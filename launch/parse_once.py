"""What omegaconf parses again and again, parsed once per distinct text.

Runs on: every process that imports launch (launch/__init__.py installs it): the login node and the job.

- Interpolations: omegaconf parses a `${...}` with ANTLR's pure-Python parser every time it resolves it, about a
  millisecond each. verl's config holds a few hundred distinct ones, resolved tens of thousands of times while rlaunch
  composes, plans and judges a run. A parse tree is only read after it is built (omegaconf's GrammarVisitor walks it;
  its tokens keep their own input stream, not the parser's), so one tree per (string, rule, mode) serves every
  resolution. A string that fails to parse raises each time, as before (lru_cache keeps no exception).
- YAML: Hydra reads every config file of the tree (verl's and conf/) anew for each composition, with PyYAML's
  pure-Python loader. The loader omegaconf asks for keeps each distinct text's parsed value and hands out a deep copy
  (plain dicts, lists and scalars: the caller may change it); omegaconf then builds its nodes from it as before.

Together the fit table's 55 plans take about 0.7x the CPU (bench/plan.py measures both ways);
RLAUNCH_PARSE_ONCE=off leaves omegaconf as it is.
"""

from __future__ import annotations

import copy
import functools
import os
from typing import Any

from omegaconf import _utils, base, grammar_parser
from omegaconf.resolvers import oc

# omegaconf 2.3's modules that imported `parse` by name, each holding its own reference
_PARSE_IMPORTERS = (grammar_parser, base, _utils, oc)
_parsed_yaml: dict[str | bytes, Any] = {}  # the text as the stream gave it -> its parsed value


def install() -> None:
    if hasattr(grammar_parser.parse, "cache_info") or os.environ.get("RLAUNCH_PARSE_ONCE") == "off":
        return
    original = grammar_parser.parse
    cached = functools.lru_cache(maxsize=8192)(original)
    for module in _PARSE_IMPORTERS:
        if getattr(module, "parse", None) is original:
            module.parse = cached  # type: ignore[attr-defined]
    loader = yaml_loader_parsing_once(_utils.get_yaml_loader())
    # omegaconf imports get_yaml_loader from _utils where it loads a file or a YAML string (OmegaConf.load, .create)
    _utils.get_yaml_loader = lambda: loader


def yaml_loader_parsing_once(loader: type) -> type:
    class ParsingOnce(loader):  # type: ignore[misc, valid-type]
        def __init__(self, stream: Any) -> None:
            self._text = stream.read() if hasattr(stream, "read") else stream
            super().__init__(self._text)

        def get_single_data(self) -> Any:
            if self._text not in _parsed_yaml:
                _parsed_yaml[self._text] = super().get_single_data()
            return copy.deepcopy(_parsed_yaml[self._text])

    return ParsingOnce
