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

The classification is the Datalog stage ``constant_or_scalar_splitter``; Python walks
in Shardy's order and clones.
"""

from __future__ import annotations

from sdy_dl.ir.mlir_ops import (SymbolNamer, is_block_arg, is_scalar, is_static_tensor,
                                module_ops, owning_op, tensor_info, users)
from sdy_dl.ir.model import Module
from sdy_dl.ir.op_index import op_index, op_names
from sdy_dl.ir.opaque import recreate_renamed
from sdy_dl.ir.traits import TERMINATORS, is_elementwise as is_elementwise_op, ops_with
from sdy_dl.ir.walk import key, walk_named, walk_pre_not_into
from sdy_dl.passes import PassOptions, Stage, register
from sdy_dl.passes.call_graph import (call_graph, call_graph_post_order, callee_name, calls_in,
                                      clone_func, func_table, has_body, original_name)

#: The Datalog stage this pass runs (``datalog/constant_or_scalar_splitter/``).
STAGE = Stage("constant_or_scalar_splitter")


def is_elementwise(mop, name: str) -> bool:
    """Shardy's ``isElementwise`` (``transforms/common/op_properties.cc``) of a raw op
    called ``name``."""
    return is_elementwise_op(name, lambda: (
        tensor_info(mop.operands[0].type)[1] if mop.operands else None,
        tensor_info(mop.results[0].type)[1] if mop.results else None))


def is_pure(mop, name: str, operands: list) -> bool:
    """MLIR's ``isPure`` for the ops that matter here: no memory effects and
    speculatable (stablehlo's conditional speculatability needs static shapes);
    ``name``: ``mop``'s name, ``operands``: its operand values."""
    if name in ("sdy.sharding_constraint",):
        return False
    if name.startswith("chlo.") or name.startswith("sdy."):
        return True
    if name.startswith("stablehlo."):
        return (all(is_static_tensor(v.type) for v in operands)
                and all(is_static_tensor(t) for t in mop.results.types))
    return False


#: The op names of the traits :func:`op_kind` reads.
_ROOTS = ops_with("constant_expression_root")
_SHAPE_OPS = {False: ops_with("constant_preserving_shape"),
              True: ops_with("legacy_constant_preserving_shape")}


def op_kind(mop, name: str, legacy: bool, operands: list) -> str:
    """The ``in_kind`` fact of ``mop`` (``name``: its name, ``operands``: its operand values)."""
    if name in _ROOTS:
        return "constant"
    if name in TERMINATORS:
        return "terminator"
    if not legacy:
        if name == "func.call":
            return "call"
        if name == "sdy.named_computation":
            return "named"
    if (name in _SHAPE_OPS[legacy] or is_elementwise(mop, name)) and is_pure(mop, name, operands):
        return "preserving"
    return "other"


# -- stablehlo.constant -> sdy.constant --------------------------------------------------

def convert_constants(module: Module) -> None:
    """Turn every ``stablehlo.constant`` into an ``sdy.constant``; the module's
    op index stays current (each new op takes the old one's place in the
    pre-order walks; its op names are read again)."""
    from jaxlib.mlir import ir

    index = op_index(module)
    for top in module_ops(module):
        ops, names = index.walk(top)
        new_ops: dict = {}
        for n, (mop, name) in enumerate(zip(ops, names)):
            if name == "stablehlo.constant":
                new = new_ops[n] = recreate_renamed(mop, "sdy.constant")  # (complex values: text)
                ir.InsertionPoint(mop).insert(new)
                mop.results[0].replace_all_uses_with(new.results[0])
                mop.erase()
        if new_ops:
            index.replace(top, new_ops, "sdy.constant")


def body_walk(op) -> tuple[list, list[str]]:
    """Pre-order walk of the body of a function or named computation ``op`` that
    does not enter the named computations nested in it, with the ops' names."""
    ops = walk_pre_not_into(op, "sdy.named_computation")[1:]
    return ops, [mop.name for mop in ops]


def named_name(mop) -> str:
    from jaxlib.mlir import ir

    return ir.StringAttr(mop.attributes["name"]).value


# -- the pass -----------------------------------------------------------------------------

#: Ops the walks pass over: neither classified nor split.
_SKIPPED = ("sdy.sharding_group", "func.func")


def numbered(walks: list) -> list:
    """``[(func, named computation, [(number, op, name)])]``: the ops of ``walks``
    (``[(func, named computation, ([ops], [names]))]``) to classify, numbered in
    walk order."""
    out, n = [], 0
    for f, nc, (wops, names) in walks:
        kept = [(mop, name) for mop, name in zip(wops, names) if name not in _SKIPPED]
        out.append((f, nc, [(i, mop, name) for i, (mop, name) in enumerate(kept, n)]))
        n += len(kept)
    return out


class _Splitter:
    def __init__(self, module: Module, options: PassOptions, legacy: bool, groups: bool = True):
        self.module = module
        self.groups = groups   # whether the module may hold sharding groups
        self.options = options
        self.legacy = legacy
        self.namer = SymbolNamer(module)

    def walks(self) -> list:
        """``[(func, named computation, [ops])]`` in processing order: the named
        computation whose body was walked (the one enclosing each of its ops, as
        the walk does not enter nested ones), or None for a function body."""
        out = []
        if self.legacy:
            call_graph_post_order(self.module)  # rejects a recursive call graph
            for f in module_ops(self.module):
                if f.name == "func.func" and has_body(f):
                    ops, names = op_index(self.module).walk(f, post=True)
                    out.append((f, None, (ops[:-1], names[:-1])))
            return out
        index = op_index(self.module)
        bodies, holds_named = {}, set()
        for f in module_ops(self.module):
            if f.name == "func.func" and has_body(f):
                # Named computations (those nested in others are found only by
                # entering them) hold ops and calls the body misses.
                ops, names = index.walk(f)
                if "sdy.named_computation" in names:
                    holds_named.add(key(f))
                    bodies[key(f)] = body_walk(f)
                else:
                    bodies[key(f)] = (ops[1:], names[1:])

        def calls_of(f) -> list:
            if key(f) in holds_named:
                return calls_in(f)
            return [mop for mop, name in zip(*bodies[key(f)]) if name == "func.call"]
        for f in call_graph(self.module, calls_of)[0]:
            if key(f) in holds_named:
                for nc in walk_named(f, ("sdy.named_computation",), post=True):
                    out.append((f, nc, body_walk(nc)))
            out.append((f, None, bodies[key(f)]))
        return out

    def analyse(self, walks: list) -> tuple[set, set, dict]:
        """Classify the numbered ops of ``walks`` (:func:`numbered`) with the Datalog
        stage ``constant_or_scalar_splitter``: the numbers of the constant expressions, of the
        scalar expansions, and {number: operands to split}."""
        out = STAGE.run(self.facts(walks), self.options,
                        variant="legacy" if self.legacy else "or_scalar")
        split: dict = {}
        for i, k in out["split_operand"]:
            split.setdefault(i, []).append(k)
        return {i for (i,) in out["const_expr"]}, {i for (i,) in out["expansion"]}, split

    def facts(self, walks: list) -> dict:
        """The input facts of ``constant_or_scalar_splitter`` for the numbered ops of ``walks``."""
        # the number of the op defining each value (an op result's hash and
        # equality are its MLIR value's)
        defs = {result: i for _, _, items in walks for i, mop, _ in items
                for result in mop.results}
        def_of = defs.get
        funcs = func_table(self.module)
        legacy = self.legacy
        kinds, num_operands, operand_def, scalar_broadcast = [], [], [], []
        calls, named = [], []
        func_members: dict = {}    # function id -> its ops, in time order
        named_members: dict = {}   # named computation id -> its ops, in time order
        fnames: dict = {}          # function original name -> id
        nnames: dict = {}          # named computation name -> id

        def fid(name: str) -> int:
            return fnames.setdefault(name, len(fnames))

        def nid(name: str) -> int:
            return nnames.setdefault(name, len(nnames))

        for f, nc, items in walks:
            members = func_members.setdefault(fid(original_name(f)), [])
            nested = (named_members.setdefault(nid(named_name(nc)), [])
                      if nc is not None and not legacy else None)
            for i, mop, name in items:
                operands = list(mop.operands)
                kind = op_kind(mop, name, legacy, operands)
                kinds.append((i, kind))
                num_operands.append((i, len(operands)))
                for k, v in enumerate(operands):
                    d = def_of(v)
                    if d is not None:
                        operand_def.append((i, k, d))
                    elif not is_block_arg(v):
                        operand_def.append((i, k, -1))
                if legacy:
                    continue
                if name == "stablehlo.broadcast_in_dim" and is_scalar(operands[0]):
                    scalar_broadcast.append((i,))
                if kind == "call":
                    callee = funcs.get(callee_name(mop))
                    target = original_name(callee) if callee is not None else callee_name(mop)
                    calls.append((i, fid(target)))
                elif kind == "named":
                    named.append((i, nid(named_name(mop))))
                members.append(i)
                if nested is not None:
                    nested.append(i)
        facts = {"in_kind": kinds,
                 "in_operand_def": operand_def, "in_num_operands": num_operands,
                 "in_scalar_broadcast": scalar_broadcast}
        if not legacy:
            # (members of the called function names only: the stage reads no other
            # function's, and a large main would be most of the facts)
            called = {f for _, f in calls}
            facts.update({
                "in_call_target": calls, "in_named_name": named,
                "in_member_func": [(f, j, i) for f, members in func_members.items()
                                   if f in called for j, i in enumerate(members)],
                "in_member_named": [(n, j, i) for n, members in named_members.items()
                                    for j, i in enumerate(members)]})
        return facts

    def run(self) -> None:
        walks = numbered(self.walks())
        const, expansion, split = self.analyse(walks)
        for _, _, items in walks:
            constant_ops: list = []
            expansion_ops: list = []
            for i, mop, _ in items:
                if i in const:
                    constant_ops.append(mop)
                    continue
                if i in expansion:
                    expansion_ops.append(mop)
                    continue
                for n in sorted(split.get(i, ())):
                    operand = mop.operands[n]
                    mop.operands[n] = self.clone_sub_computation(operand)
            self.erase(expansion_ops, constant_ops)

    def erase(self, expansion_ops: list, constant_ops: list) -> None:
        for mop in expansion_ops + list(reversed(constant_ops)):
            if not self.groups:   # no user can be a sharding group
                if self.legacy or all(next(iter(r.uses), None) is None for r in mop.results):
                    mop.erase()
                continue
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
        # original value -> its clone's (values hash and compare as their MLIR
        # values; the originals stay while cloning)
        mapping: dict = {}
        self._clone(result, mapping)
        return mapping[result]

    def _clone(self, result, mapping: dict) -> None:
        """Clone the ops ``result`` (not a scalar unless legacy) is computed by,
        operands first (iteratively: the depth of a sub-computation is not
        bounded); each op's operands are read once."""
        from jaxlib.mlir import ir

        legacy = self.legacy

        def skip(value) -> bool:
            return value in mapping or (not legacy and is_scalar(value))

        def entry(value) -> tuple:
            op = owning_op(value)
            operands = list(op.operands)
            return value, op, operands, iter(operands)

        stack = [entry(result)]
        while stack:
            value, op, operands, pending = stack[-1]
            operand = next(pending, None)
            if operand is not None:
                if not is_block_arg(operand) and not skip(operand):
                    stack.append(entry(operand))
                continue
            stack.pop()
            clone = op.clone(ip=ir.InsertionPoint(op))
            for k, operand in enumerate(operands):
                new = mapping.get(operand)
                if new is not None:
                    clone.operands[k] = new
            for old, new in zip(op.results, clone.results):
                mapping[old] = new
            if clone.name == "func.call":
                callee = func_table(self.module)[callee_name(clone)]
                clone.attributes["callee"] = ir.FlatSymbolRefAttr.get(
                    clone_func(self.module, self.namer, callee))
            for user in users(value) if self.groups else ():
                if user.name == "sdy.sharding_group":
                    group = user.clone(ip=ir.InsertionPoint(op))
                    group.operands[0] = mapping[value]


def _run(module: Module, options: PassOptions, legacy: bool) -> Module:
    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        convert_constants(module)
        names = op_names(module)   # (the split only copies ops there, and erases)
        _Splitter(module, options, legacy, "sdy.sharding_group" in names).run()
        return module.invalidate(names=names)


@register("constant-or-scalar-splitter",
          "Clone constant sub-computations and scalar broadcasts for each use.")
def run_or_scalar(module: Module, options: PassOptions) -> Module:
    return _run(module, options, legacy=False)


@register("constant-splitter",
          "Clone constant sub-computations (constant, iota, broadcast, slice, elementwise) per use.")
def run_legacy(module: Module, options: PassOptions) -> Module:
    return _run(module, options, legacy=True)
