"""schemathesis hooks for tests/e2e/test_api_fuzz.py, loaded by `st run` (SCHEMATHESIS_HOOKS).

Generated ids rarely name anything, so valid (positive) cases name objects that the test made for the
fuzzing user (`AGENTSITE_FUZZ_SEEDS`, JSON: path parameter → values, each list with one that names
nothing): the operations then reach their real work, not only their 404. A DELETE of the object itself
names one kept for deleting (`"delete"`: path parameter → values), so that the others stay for the rest of
the run. Cases of wrong input keep what was generated. And the fuzzer never revokes the key it
authenticates with (`AGENTSITE_FUZZ_OWN_KEY_ID`), whichever phase made the case.
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis
from hypothesis import strategies as st
from schemathesis import GenerationMode

SEEDS: dict[str, Any] = json.loads(os.environ.get("AGENTSITE_FUZZ_SEEDS", "{}"))
OWN_KEY_ID = os.environ.get("AGENTSITE_FUZZ_OWN_KEY_ID")


def _values(case: Any, name: str) -> list[str]:
    deletes_it = case.method.upper() == "DELETE" and case.path.rstrip("}").endswith("{" + name)
    return list(SEEDS.get("delete", {}).get(name, [])) if deletes_it else list(SEEDS.get(name, []))


@schemathesis.hook
def flatmap_case(context: Any, case: Any) -> Any:
    known = {
        name: st.sampled_from(values)
        for name in case.path_parameters or {}
        if (values := _values(case, name))
    }
    positive = case.meta is None or case.meta.generation.mode == GenerationMode.POSITIVE
    if not known or not positive:
        return st.just(case)

    def naming(values: dict[str, str]) -> Any:
        case.path_parameters = {**case.path_parameters, **values}
        return case

    return st.fixed_dictionaries(known).map(naming)


@schemathesis.hook
def before_call(context: Any, case: Any, **kwargs: Any) -> None:
    parameters = case.path_parameters or {}
    if case.method.upper() == "DELETE" and OWN_KEY_ID is not None and parameters.get("key_id") == OWN_KEY_ID:
        case.path_parameters = {**parameters, "key_id": "0"}
