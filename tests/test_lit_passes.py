"""Shardy's lit-test inputs for the call, propagation, export and pipeline passes, run through
jaxlib's pass and sdy-dl's (options and ``-allow-unregistered-dialect`` as the
file's RUN line gives them).

The inputs are read from a Shardy source tree at test time (nothing is copied
into this repository; :mod:`shardy_source` says where).  Every ``// -----``
chunk jaxlib accepts must give the same module from sdy-dl; a chunk jaxlib
rejects must be rejected by sdy-dl for the same reason (:func:`oracle.outcome`).
"""

from __future__ import annotations

import re

import pytest

from oracle import normalize, outcome, shardy
from shardy_source import lit_or_skip
from sdy_dl.ir import parse_module_text
from sdy_dl.ir.context import allow_unregistered_dialects
from sdy_dl.ir.loader import verify_module
from sdy_dl.passes import PassOptions, get_pass
from sdy_dl.pipeline import make_options

IMPORT = "shardy/dialect/sdy/transforms/import/test"
EXPORT = "shardy/dialect/sdy/transforms/export/test"
PROPAGATION = "shardy/dialect/sdy/transforms/propagation/test"

#: file -> (directory, sdy-dl pass, Shardy pass pipeline, extra options, allow unregistered)
FILES = {
    "import_func_calls.mlir": (IMPORT, "import-func-calls", "sdy-import-func-calls", {}, False),
    "import_func_calls_add_data_flow_edges_on_named_computations_false.mlir": (
        IMPORT, "import-func-calls",
        "sdy-import-func-calls{add-data-flow-edges-on-named-computations=false}",
        {"add_data_flow_edges_on_named_computations": False}, False),
    "call_ops_enable_full_version_false.mlir": (
        EXPORT + "/insert_explicit_reshards", "insert-explicit-reshards",
        "func.func(sdy-insert-explicit-reshards{enable-full-version=false})", {}, False),
    "insert_explicit_reshards.mlir": (
        EXPORT, "insert-explicit-reshards",
        "func.func(sdy-insert-explicit-reshards{enable-full-version=false})", {}, True),
    "reshard_to_collectives.mlir": (EXPORT, "reshard-to-collectives",
                                    "func.func(sdy-reshard-to-collectives)", {}, False),
    "reshard_to_collectives_keep_redundant_reshards_true.mlir": (
        EXPORT, "reshard-to-collectives",
        "func.func(sdy-reshard-to-collectives{keep-redundant-reshards=true})",
        {"keep_redundant_reshards": True}, False),
    "propagation_pipeline.mlir": (PROPAGATION, "propagate", "sdy-propagation-pipeline", {}, False),
    "propagation_pipeline_data_flow_edges.mlir": (PROPAGATION, "propagate",
                                                  "sdy-propagation-pipeline", {}, False),
    "unflatten_call_graph.mlir": (EXPORT, "unflatten-call-graph", "sdy-unflatten-call-graph",
                                  {}, False),
    "unflatten_call_graph_dedup_functions_fully_true.mlir": (
        EXPORT, "unflatten-call-graph", "sdy-unflatten-call-graph{dedup-functions-fully=true}",
        {"dedup_functions_fully": True}, False),
    "add_func_data_flow_edges.mlir": (IMPORT, "add-func-data-flow-edges",
                                      "sdy-add-func-data-flow-edges", {}, False),
    "sink_func_data_flow_edges.mlir": (EXPORT, "sink-func-data-flow-edges",
                                       "func.func(sdy-sink-func-data-flow-edges)", {}, False),
    "propagation_pipeline_dedup_functions_fully_true.mlir": (
        PROPAGATION, "propagate", "sdy-propagation-pipeline{dedup-functions-fully=true}",
        {"dedup_functions_fully": True}, False),
    "basic_propagation_data_flow_edges.mlir": (PROPAGATION, "basic-propagate",
                                               "sdy-basic-propagate", {}, False),
    "basic_propagation.mlir": (PROPAGATION, "basic-propagate", "sdy-basic-propagate", {}, False),
    "aggressive_propagation.mlir": (PROPAGATION, "aggressive-propagate",
                                    "sdy-aggressive-propagate{propagation-strategy=aggressive}",
                                    {}, False),
    "op_priority_propagation.mlir": (PROPAGATION, "op-priority-propagate",
                                     "sdy-op-priority-propagate", {}, False),
    "user_priority_propagation.mlir": (PROPAGATION, "user-priority-propagate",
                                       "sdy-user-priority-propagate", {}, False),
    "sharding_group_propagation.mlir": (PROPAGATION, "basic-propagate", "sdy-basic-propagate",
                                        {}, False),
    "propagate_to_func_results.mlir": (EXPORT, "propagate-to-func-results",
                                       "sdy-propagate-to-func-results", {}, True),
}

#: The export passes one by one (the function passes nested in func.func, as
#: Shardy registers them).
FILES.update({
    f"{name}.mlir": (EXPORT, name.replace("_", "-"),
                     f"func.func(sdy-{name.replace('_', '-')})" if nested
                     else f"sdy-{name.replace('_', '-')}", {}, False)
    for name, nested in (("close_shardings", False), ("constant_or_scalar_merger", True),
                         ("drop_sharding_rules", True), ("export_named_computations", False),
                         ("insert_func_call_reshards", False), ("remove_sharding_groups", False),
                         ("remove_sub_axes_in_input_output_shardings", False),
                         ("sharding_constraint_to_reshard", True), ("sink_data_flow_edges", True),
                         ("update_non_divisible_input_output_shardings", False))})

#: The inputs of Shardy's full-version insert-explicit-reshards lit files, run
#: through the non-full version the pipeline uses (keyed by their path under
#: the export test directory).
FILES.update({
    f"insert_explicit_reshards/{name}.mlir": (
        EXPORT, "insert-explicit-reshards",
        "func.func(sdy-insert-explicit-reshards{enable-full-version=false})", {}, False)
    for name in ("bitcast_convert", "broadcast_in_dim", "cholesky_triangular_solve",
                 "clamp_select", "collective_ops", "concatenate", "convolution", "custom_call",
                 "data_flow_ops", "dot_dot_general", "dynamic_slice_dynamic_update_slice",
                 "elementwise_ops", "fft", "func_inputs_outputs", "gather_scatter",
                 "manual_computation", "meshes", "pad_slice", "reduce",
                 "reduce_window_select_and_scatter", "reshape", "reverse", "rng_bit_generator",
                 "single_device_sharding", "sort", "unreduced")})


def split_funcs(text: str) -> list[str]:
    """A file without ``// -----`` split into one module per top-level function
    (each with every mesh of the file), so that a function jaxlib's older parser
    rejects does not hide the others."""
    meshes = "\n".join(line for line in text.splitlines() if line.startswith("sdy.mesh"))
    parts = re.split(r"^(?=func\.func )", text, flags=re.M)[1:]
    return [meshes + "\n" + part for part in parts]


def chunks_of(text: str) -> list[str]:
    chunks = re.split(r"^// -----\s*$", text, flags=re.M)
    return chunks if len(chunks) > 1 else split_funcs(text)


def run_ours(pass_name: str, text: str, extra: dict) -> str:
    """``text`` after sdy-dl's pass (``propagate``: the whole pipeline), verified
    as ``sdy-dl pass`` and Shardy's pass manager verify it, printed."""
    module = parse_module_text(text, "<lit>")
    options = make_options(extra, engine="clingo")
    if pass_name == "propagate":
        from sdy_dl.pipeline import propagate

        return propagate(module, options).print()
    module = get_pass(pass_name).run(module, options)
    verify_module(module)
    return module.print()


def run_lit(name: str) -> tuple[list[str], int]:
    """(names of the chunks that differ, number of chunks) of lit file ``name``."""
    directory, pass_name, pipeline, extra, unregistered = FILES[name]
    text = lit_or_skip(name, directory)
    chunks = chunks_of(text)
    differ = []
    allow_unregistered_dialects(unregistered)
    try:
        for i, chunk in enumerate(chunks):
            expected = outcome(lambda: shardy(chunk, pipeline), chunk)
            actual = outcome(lambda: normalize(run_ours(pass_name, chunk, extra)), chunk)
            if expected != actual:
                differ.append(chunk_name(chunk, i))
    finally:
        allow_unregistered_dialects(False)
    return differ, len(chunks)


#: Chunks (by function name) that still differ, each with its reason; the test
#: fails when any other chunk differs.
KNOWN: dict[str, dict[str, str]] = {
    "reshard_to_collectives.mlir": {
        chunk: "both refuse the reshard at its place; Shardy's message is MLIR's 'failed to "
               "legalize operation', sdy-dl's says why (the shardings' ranks differ)"
        for chunk in ("single_device_in_sharding", "single_device_out_sharding")},
}


def chunk_name(chunk: str, i: int) -> str:
    """The first function's name in ``chunk`` (the chunk's index when it has none)."""
    m = re.search(r"func\.func (?:private )?@(\w+)", chunk)
    return m.group(1) if m else str(i)


#: The whole-pipeline files (slower: every chunk is propagated).
SLOW = {"propagation_pipeline.mlir", "propagation_pipeline_data_flow_edges.mlir",
        "propagation_pipeline_dedup_functions_fully_true.mlir"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in FILES])
def test_lit_file(name):
    differ, total = run_lit(name)
    unexpected = sorted(set(differ) - set(KNOWN.get(name, {})))
    assert not unexpected, f"{len(differ)}/{total} chunks differ: {unexpected}"


#: Files whose RUN line chains passes or gives pass options: file ->
#: (directory, sdy-dl passes in order, Shardy pipeline, pass options).
CHAINED = {
    "basic_propagation_manual_computation.mlir": (
        PROPAGATION, ("add-data-flow-edges", "basic-propagate", "sink-data-flow-edges"),
        "sdy-add-data-flow-edges,sdy-basic-propagate,func.func(sdy-sink-data-flow-edges)", {}),
    "basic_propagation_token.mlir": (
        PROPAGATION, ("add-data-flow-edges", "basic-propagate", "sink-data-flow-edges"),
        "sdy-add-data-flow-edges,sdy-basic-propagate,func.func(sdy-sink-data-flow-edges)", {}),
    "basic_propagation_conservative.mlir": (
        PROPAGATION, ("basic-propagate",), "sdy-basic-propagate{conservative-propagation=true}",
        {"conservative-propagation": True}),
    "basic_propagation_keep_sharding_rules.mlir": (
        PROPAGATION, ("basic-propagate",), "sdy-basic-propagate{keep-sharding-rules=true}",
        {"keep-sharding-rules": True}),
    "export_pipeline.mlir": (
        EXPORT, ("add-data-flow-edges", "export-pipeline"),
        "sdy-add-data-flow-edges,sdy-export-pipeline", {}),
}


@pytest.mark.parametrize("name", sorted(CHAINED))
def test_chained_lit_file(name):
    directory, passes, pipeline, given = CHAINED[name]
    text = lit_or_skip(name, directory)

    def run(chunk):
        module = parse_module_text(chunk, "<lit>")
        for pass_name in passes:
            options = PassOptions.create(pass_name, given if pass_name == passes[-1] else None,
                                         engine="clingo")
            module = get_pass(pass_name).run(module, options)
        return normalize(module.print())

    chunks = chunks_of(text)
    differ = [chunk_name(chunk, i) for i, chunk in enumerate(chunks)
              if outcome(lambda: shardy(chunk, pipeline), chunk) != outcome(lambda: run(chunk), chunk)]
    assert not differ, f"{len(differ)}/{len(chunks)} chunks differ: {differ}"
