"""``constant-or-scalar-splitter`` and ``constant-splitter`` (semantics §8.4).

Both first turn every ``stablehlo.constant`` into ``sdy.constant`` (same
attributes) and then give every use of a constant sub-computation by a
non-constant op its own clone of that sub-computation, placed right before
the original ops; the originals are erased afterwards.

``constant-or-scalar-splitter`` (Shardy's current pass, the one its import
pipeline runs):

* functions are visited in call-graph post-order; in each, the bodies of its
  named computations (post-order) and then its own body are walked in
  pre-order without entering nested named computations;
* a constant expression is an ``sdy.constant`` or ``stablehlo.iota``, or a
  constant-preserving op (pure broadcast_in_dim/reshape/slice/elementwise, a
  call of a function -- by original name -- or a named computation -- by name
  -- none of whose ops processed so far was non-preserving) whose operands
  are all constant expressions;
* a broadcast of a rank-0 value that is not a constant expression is a scalar
  expansion, split like a constant;
* scalars are never cloned; a cloned call gets a recursively cloned callee
  (``foo_0``, ...); ``sharding_group`` users of cloned values are cloned too;
* originals left without users other than sharding groups are erased with
  those groups (scalar expansions first, then constants in reverse order).

``constant-splitter`` (the older pass, not registered in jaxlib): per
function, ops are walked in post-order; constant expressions are constants,
iotas, and pure broadcast_in_dim/slice/elementwise ops of constant
expressions; scalars are cloned too, there are no scalar expansions and no
call/named-computation handling; every constant expression is erased at the
end (with its sharding groups).

The classification is the Datalog stage ``import_constants``; Python walks
in Shardy's order and clones.
"""

from __future__ import annotations

from sdy_dl.ir.model import Module
from sdy_dl.passes import PassOptions, register
from sdy_dl.passes.call_graph import call_graph_post_order, callee_name, func_table, has_body, original_name
from sdy_dl.passes.import_common import (ORIGINAL_FUNC_NAME_ATTR, TERMINATOR_OPS, SymbolNamer,
                                         enclosing, is_block_arg, is_scalar, is_static_tensor,
                                         key, module_ops, owning_op, rebuild, run_analysis,
                                         symbol_name, tensor_info, users, walk_post, walk_pre)

_SHLO_ELEMENTWISE = frozenset("""
abs cbrt ceil convert count_leading_zeros cosine exponential exponential_minus_one floor imag
is_finite log log_plus_one logistic not negate popcnt real round_nearest_afz round_nearest_even
rsqrt sign sine sqrt tan tanh add atan2 complex divide maximum minimum multiply power remainder
shift_left shift_right_arithmetic shift_right_logical subtract and or xor uniform_quantize
uniform_dequantize compare reduce_precision clamp select
""".split())
_CHLO_ELEMENTWISE = frozenset("""
broadcast_add broadcast_atan2 broadcast_divide broadcast_maximum broadcast_minimum
broadcast_multiply broadcast_next_after broadcast_polygamma broadcast_power broadcast_remainder
broadcast_shift_left broadcast_shift_right_arithmetic broadcast_shift_right_logical
broadcast_subtract broadcast_zeta broadcast_and broadcast_or broadcast_xor broadcast_complex
_asin_acos_kernel acos acosh asin asinh atan atanh bessel_i1e conj cosh sinh tan digamma erf
erf_inv erfc is_inf is_neg_inf is_pos_inf lgamma square broadcast_compare broadcast_select
constant_like
""".split())


def is_elementwise(mop) -> bool:
    """Shardy's ``isElementwise`` (``transforms/common/op_properties.cc``)."""
    name = mop.name
    dialect, _, short = name.partition(".")
    if dialect == "stablehlo" and short in _SHLO_ELEMENTWISE:
        return True
    if dialect == "chlo" and short in _CHLO_ELEMENTWISE:
        return True
    if name == "stablehlo.bitcast_convert":
        return tensor_info(mop.operands[0].type)[1] == tensor_info(mop.results[0].type)[1]
    return name in ("sdy.propagation_barrier", "sdy.sharding_constraint", "sdy.reshard")


def is_pure(mop) -> bool:
    """MLIR's ``isPure`` for the ops that matter here: no memory effects and
    speculatable (stablehlo's conditional speculatability needs static shapes)."""
    name = mop.name
    if name in ("sdy.sharding_constraint",):
        return False
    if name.startswith("chlo.") or name.startswith("sdy."):
        return True
    if name.startswith("stablehlo."):
        return all(is_static_tensor(v.type) for v in list(mop.operands) + list(mop.results))
    return False


def op_kind(mop, legacy: bool) -> str:
    name = mop.name
    if name in ("sdy.constant", "stablehlo.iota"):
        return "constant"
    if name in TERMINATOR_OPS:
        return "terminator"
    if not legacy:
        if name == "func.call":
            return "call"
        if name == "sdy.named_computation":
            return "named"
    shape_ops = (("stablehlo.broadcast_in_dim", "stablehlo.slice") if legacy else
                 ("stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.slice"))
    if is_pure(mop) and (name in shape_ops or is_elementwise(mop)):
        return "preserving"
    return "other"


# -- stablehlo.constant -> sdy.constant --------------------------------------------------

def convert_constants(root) -> None:
    from jaxlib.mlir import ir

    for mop in walk_pre(root):
        if mop.name != "stablehlo.constant":
            continue
        attrs = {n: mop.attributes[n] for n in mop.attributes}
        with mop.location:
            new = ir.Operation.create("sdy.constant", results=[mop.results[0].type],
                                      attributes=attrs)
        ir.InsertionPoint(mop).insert(new)
        mop.results[0].replace_all_uses_with(new.results[0])
        mop.erase()


def region_walk(region) -> list:
    """Pre-order walk of a region that does not enter named computations."""
    out: list = []

    def visit(op):
        op = op.operation
        out.append(op)
        if op.name == "sdy.named_computation":
            return
        for r in op.regions:
            for b in r.blocks:
                for child in b.operations:
                    visit(child)

    for b in region.blocks:
        for child in b.operations:
            visit(child)
    return out


def named_name(mop) -> str:
    from jaxlib.mlir import ir

    return ir.StringAttr(mop.attributes["name"]).value


# -- the pass -----------------------------------------------------------------------------

class _Splitter:
    def __init__(self, module: Module, options: PassOptions, legacy: bool):
        self.module = module
        self.options = options
        self.legacy = legacy
        self.namer = SymbolNamer(module)

    # Walk lists: [(func, [ops])] in processing order.
    def walks(self) -> list:
        out = []
        if self.legacy:
            for f in module_ops(self.module):
                if f.name == "func.func" and has_body(f):
                    out.append((f, walk_post(f)[:-1]))
            return out
        for f in call_graph_post_order(self.module):
            for nc in walk_post(f):
                if nc.name == "sdy.named_computation":
                    out.append((f, region_walk(nc.regions[0])))
            out.append((f, region_walk(f.regions[0])))
        return out

    def analyse(self, walks):
        ids: dict = {}
        ops: list = []
        for _, wops in walks:
            for mop in wops:
                if mop.name in ("sdy.sharding_group", "func.func"):
                    continue
                ids[key(mop)] = len(ops)
                ops.append(mop)
        funcs = func_table(self.module)
        facts = {k: [] for k in ("proc", "kind", "operand_def", "num_operands", "scalar_broadcast")}
        if not self.legacy:
            facts.update({k: [] for k in ("call_target", "named_name", "member_func",
                                          "member_named")})
        member_f: dict = {}
        member_n: dict = {}
        fnames: dict = {}      # function original name -> id
        nnames: dict = {}      # named computation name -> id

        def fid(name: str) -> int:
            return fnames.setdefault(name, len(fnames))

        def nid(name: str) -> int:
            return nnames.setdefault(name, len(nnames))

        for f, wops in walks:
            fname = fid(original_name(f))
            for mop in wops:
                if key(mop) not in ids:
                    continue
                i = ids[key(mop)]
                facts["proc"].append((i, i))
                kind = op_kind(mop, self.legacy)
                facts["kind"].append((i, kind))
                facts["num_operands"].append((i, len(mop.operands)))
                for k, v in enumerate(mop.operands):
                    if not is_block_arg(v):
                        d = key(owning_op(v))
                        if d in ids:
                            facts["operand_def"].append((i, k, ids[d]))
                        else:
                            facts["operand_def"].append((i, k, -1))
                if (not self.legacy and mop.name == "stablehlo.broadcast_in_dim"
                        and is_scalar(mop.operands[0])):
                    facts["scalar_broadcast"].append((i,))
                if self.legacy:
                    continue
                if kind == "call":
                    callee = funcs.get(callee_name(mop))
                    target = original_name(callee) if callee is not None else callee_name(mop)
                    facts["call_target"].append((i, fid(target)))
                elif kind == "named":
                    facts["named_name"].append((i, nid(named_name(mop))))
                j = member_f.get(fname, 0)
                member_f[fname] = j + 1
                facts["member_func"].append((fname, j, i))
                nc = enclosing(mop, "sdy.named_computation")
                if nc is not None:
                    n = nid(named_name(nc))
                    j = member_n.get(n, 0)
                    member_n[n] = j + 1
                    facts["member_named"].append((n, j, i))
        out = run_analysis("import_constants", facts, self.options,
                           variant="legacy" if self.legacy else "or_scalar")
        const = {key(ops[i]) for (i,) in out["const_expr"]}
        expansion = {key(ops[i]) for (i,) in out["expansion"]}
        split: dict = {}
        for i, k in out["split_operand"]:
            split.setdefault(key(ops[i]), []).append(k)
        return const, expansion, split

    def run(self) -> None:
        walks = self.walks()
        const, expansion, split = self.analyse(walks)
        for _, wops in walks:
            constant_ops: list = []
            expansion_ops: list = []
            for mop in wops:
                if mop.name in ("sdy.sharding_group", "func.func"):
                    continue
                if key(mop) in const:
                    constant_ops.append(mop)
                    continue
                if key(mop) in expansion:
                    expansion_ops.append(mop)
                    continue
                for k in sorted(split.get(key(mop), ())):
                    operand = mop.operands[k]
                    mop.operands[k] = self.clone_sub_computation(operand)
            self.erase(expansion_ops, constant_ops)

    def erase(self, expansion_ops: list, constant_ops: list) -> None:
        for mop in expansion_ops + list(reversed(constant_ops)):
            us = [u for r in mop.results for u in users(r)]
            if self.legacy:
                for u in us:
                    if u.name == "sdy.sharding_group":
                        u.erase()
                mop.erase()
                continue
            if all(u.name == "sdy.sharding_group" for u in us):
                for u in us:
                    u.erase()
                mop.erase()

    def clone_sub_computation(self, result):
        if not self.legacy and is_scalar(result):
            return result
        mapping: dict = {}
        self._clone(result, mapping)
        return mapping[key(result)]

    def _clone(self, result, mapping: dict) -> None:
        from jaxlib.mlir import ir

        if (not self.legacy and is_scalar(result)) or key(result) in mapping:
            return
        op = owning_op(result)
        for operand in op.operands:
            if not is_block_arg(operand):
                self._clone(operand, mapping)
        clone = op.clone(ip=ir.InsertionPoint(op))
        for k, operand in enumerate(op.operands):
            if key(operand) in mapping:
                clone.operands[k] = mapping[key(operand)]
        for old, new in zip(op.results, clone.results):
            mapping[key(old)] = new
        if clone.name == "func.call":
            callee = func_table(self.module)[callee_name(clone)]
            clone.attributes["callee"] = ir.FlatSymbolRefAttr.get(self.clone_func(callee))
        for user in users(result):
            if user.name == "sdy.sharding_group":
                group = user.clone(ip=ir.InsertionPoint(op))
                group.operands[0] = mapping[key(result)]

    def clone_func(self, func) -> str:
        """``cloneFuncRecursively`` + ``SymbolTable::insert``; returns the new name."""
        from jaxlib.mlir import ir

        clone = func.clone(ip=False)
        clone.attributes[ORIGINAL_FUNC_NAME_ATTR] = ir.StringAttr.get(original_name(func))
        funcs = func_table(self.module)
        for mop in walk_post(clone):
            if mop.name == "func.call":
                callee = funcs[callee_name(mop)]
                mop.attributes["callee"] = ir.FlatSymbolRefAttr.get(self.clone_func(callee))
        name = self.namer.insert(symbol_name(clone))
        clone.attributes["sym_name"] = ir.StringAttr.get(name)
        ir.InsertionPoint(self.module.mlir.body).insert(clone)
        return name


def _run(module: Module, options: PassOptions, legacy: bool) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        convert_constants(module.mlir.operation)
        _Splitter(module, options, legacy).run()
        return rebuild(module)


@register("constant-or-scalar-splitter",
          "Clone constant sub-computations and scalar broadcasts for each use.")
def run_or_scalar(module: Module, options: PassOptions) -> Module:
    return _run(module, options, legacy=False)


@register("constant-splitter",
          "Clone constant sub-computations (constant, iota, broadcast, slice, elementwise) per use.")
def run_legacy(module: Module, options: PassOptions) -> Module:
    return _run(module, options, legacy=True)
