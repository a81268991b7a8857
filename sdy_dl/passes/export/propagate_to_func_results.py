"""``propagate-to-func-results`` (Shardy's ``sdy-propagate-to-func-results``, §8.7).

For every function except the main one (the only function, else ``main``)
whose body ends in ``func.return``: each result attribute gets the sharding
of the returned value, or loses its ``sdy.sharding`` when the value has
none.  Call-free modules have only the main function, so nothing changes.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import funcs, main_func
from sdy_dl.ir.model import Module
from sdy_dl.ir.storage import read_func_attr, write_func_attr
from sdy_dl.ir.value_sharding import get_sharding
from sdy_dl.ir.walk import key
from sdy_dl.passes import PassOptions, register


@register("propagate-to-func-results",
          "Copy return-value shardings onto the result attributes of non-main functions.")
def run(module: Module, options: PassOptions) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        main = main_func(module)
        for func in funcs(module):
            if main is not None and key(func) == key(main):
                continue
            blocks = list(func.regions[0].blocks)
            if not blocks:
                continue
            ops = list(blocks[0].operations)
            if not ops or ops[-1].name != "func.return":
                continue
            for i, value in enumerate(ops[-1].operands):
                sharding = get_sharding(value)
                if sharding is None and read_func_attr(func, "res_attrs", i) is None:
                    continue
                write_func_attr(func, "res_attrs", i, sharding)
        return module.invalidate(ops_kept=True)
