"""A readable summary of a module: meshes, op counts, annotated values."""

from __future__ import annotations

from collections import Counter

from sdy_dl.ir import Module
from sdy_dl.ir.storage import is_shardable, stored_result_sharding, stored_sharding


def annotated_values(module: Module):
    """Yield (func name, place, value name, sharding) for every stored sharding."""
    for op in module.ops:
        func = op if op.name == "func.func" else op.enclosing("func.func")
        fname = _func_name(func)
        if op.name == "func.func":
            for v in module.func_args(op):
                s = stored_sharding(v)
                if s is not None:
                    yield fname, f"argument {v.index}", v.name, s
            for i in range(len(op.mlir.attributes["function_type"].value.results)):
                s = stored_result_sharding(op, i)
                if s is not None:
                    yield fname, f"result {i}", f"result {i}", s
            continue
        for region in op.regions:
            for block in region.blocks:
                for v in block.args:
                    s = stored_sharding(v) if is_shardable(v) else None
                    if s is not None:
                        yield fname, f"{op.name} block argument", v.name, s
        for v in op.results:
            s = stored_sharding(v)
            if s is not None:
                yield fname, f"{op.name} line {op.line}", v.name, s


def module_summary(module: Module) -> dict:
    """A JSON-ready summary of ``module``."""
    counts = Counter(op.name for op in module.ops
                     if op.name not in ("sdy.mesh", "func.func") and op.parent is not None)
    return {
        "file": module.file,
        "meshes": {name: mesh.to_text() for name, mesh in module.meshes.items()},
        "functions": list(module.funcs),
        "op_counts": dict(sorted(counts.items())),
        "shardings": [
            {"function": f, "place": place, "value": name, "sharding": s.to_text()}
            for f, place, name, s in annotated_values(module)
        ],
    }


def _func_name(func) -> str:
    if func is None:
        return ""
    from jaxlib.mlir import ir

    return ir.StringAttr(func.attr("sym_name")).value
