"""``sink-func-data-flow-edges`` (Shardy's ``sdy-sink-func-data-flow-edges``,
run per function after propagation with ``dedup-functions-fully=true``, §9.2).

Every ``sdy.func_data_flow_edge`` (pre-order) gives its sharding to the value
it wraps (a function argument's ``sdy.sharding``, or the call's
``sdy.sharding`` entry for a call result): the edge's own sharding when it
has one, else, when the wrapped value has a sharding, a fully open sharding
of the same rank on that sharding's mesh.  Then the edge is replaced by the
wrapped value.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import funcs
from sdy_dl.ir.model import Module
from sdy_dl.ir.value_sharding import get_sharding, set_sharding
from sdy_dl.ir.walk import walk_named
from sdy_dl.passes import PassOptions, register, rewrite
from sdy_dl.passes.import_.add_func_data_flow_edges import EDGE_OP
from sdy_dl.sharding import TensorSharding


@register("sink-func-data-flow-edges",
          "Move each sdy.func_data_flow_edge's sharding to the value it wraps and erase it.")
def run(module: Module, options: PassOptions) -> Module:
    def edit() -> bool:
        changed = False
        for func in funcs(module):
            for edge in walk_named(func, (EDGE_OP,)):
                operand = edge.operands[0]
                sharding = get_sharding(edge.results[0])
                if sharding is None:
                    current = get_sharding(operand)
                    if current is not None:
                        sharding = TensorSharding.open_empty(current.mesh, len(current.dims))
                if sharding is not None:
                    set_sharding(operand, sharding)
                edge.results[0].replace_all_uses_with(operand)
                edge.erase()
                changed = True
        return changed
    return rewrite(module, edit)
