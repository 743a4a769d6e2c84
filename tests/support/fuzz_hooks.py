"""schemathesis hooks for tests/e2e/test_api_fuzz.py, loaded by `st run` (SCHEMATHESIS_HOOKS).

Generated ids rarely name anything, so valid (positive) cases name objects that the test made for the
fuzzing user (`AGENTSITE_FUZZ_SEEDS`: path parameter → values, JSON; each list also holds one that does not
exist): the operations then reach their real work, not only their 404. Cases of wrong input keep what was
generated.
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis
from hypothesis import strategies as st
from schemathesis import GenerationMode

SEEDS: dict[str, list[str]] = json.loads(os.environ.get("AGENTSITE_FUZZ_SEEDS", "{}"))


@schemathesis.hook
def flatmap_case(context: Any, case: Any) -> Any:
    known = {name: st.sampled_from(SEEDS[name]) for name in case.path_parameters or {} if SEEDS.get(name)}
    positive = case.meta is None or case.meta.generation.mode == GenerationMode.POSITIVE
    if not known or not positive:
        return st.just(case)

    def naming(values: dict[str, str]) -> Any:
        case.path_parameters = {**case.path_parameters, **values}
        return case

    return st.fixed_dictionaries(known).map(naming)
