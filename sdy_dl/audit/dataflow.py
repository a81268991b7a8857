"""The data flow propagation can follow, as tracer keys (recorded right before the propagation pass).

A :class:`Link` ties together the tensors one propagation step reads: an
op's operands and results, or a data-flow edge's sources and the edge
(:mod:`~sdy_dl.propagation.edges`: while loops' operands, block arguments,
returned values and results; case branches; named and manual computations;
optimization barriers; function data-flow edges).  Ops that only hold
regions or end them (``stablehlo.while``, ``func.return``, ...) tie nothing
themselves: their edges do (ops with regions and a rule, such as
``stablehlo.reduce``, are linked as ops).  Every op is linked, with a rule or not, so a
walk over the links reaches every tensor propagation could have reached;
:mod:`~sdy_dl.audit.why_not` walks them.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Ops whose tensors propagation ties through their data-flow edges, not through a rule.
EDGE_OWNERS = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if",
                         "stablehlo.optimization_barrier", "sdy.named_computation",
                         "sdy.manual_computation", "func.call", "func.func", "builtin.module"})
#: Region terminators: their operands are edge sources.
TERMINATORS = frozenset({"func.return", "stablehlo.return", "sdy.return"})


@dataclass(slots=True)
class Link:
    """The tensors of one op (operands, then results) or one data-flow edge (its
    sources, then the edge), as tracer keys."""

    tag: str            # the op's tag ("oN"), as the tracer's causes name it
    name: str           # the op's name
    keys: tuple
    owner: str = ""     # an edge: the op owning it
    owner_loc: object = None
    manual: tuple = ()  # an edge of a manual computation: its manual axes
    dimless: frozenset = frozenset()   # the keys of its values without dims (rank 0, tokens)
    owner_tag: str = ""  # an edge: the tag of the op owning it
    edge: str = ""      # a function data-flow edge: which ("@f argument 0", "@f result 0")


def flow_links(module, edges, slots: dict) -> list[Link]:
    """The links of ``module`` (with its data-flow edges ``edges`` and the value
    slots ``slots`` of :func:`~sdy_dl.propagation.edges.slot_map`)."""
    from sdy_dl.ir.manual_axes import manual_axes
    from sdy_dl.propagation.edges import call_sites, func_edge_sources
    from sdy_dl.propagation.state import value_key

    def key(v):
        return value_key(slots.get(v.vid, v))

    def dimless(values) -> frozenset:
        return frozenset(key(v) for v in values if not v.shape)

    by_op = {e.op.oid: e for e in edges}
    func_edges = None
    links = []
    for op in module.ops:
        name = op.name
        if name in TERMINATORS or name in EDGE_OWNERS:
            continue
        edge = by_op.get(op.oid)
        if edge is not None:
            owner = edge.owner.block.region.owner if edge.owner.is_block_arg else edge.owner.defining_op
            manual = (tuple(manual_axes(owner.mlir)) if owner.name == "sdy.manual_computation"
                      else ())
            links.append(Link(f"o{op.oid}", name, tuple(key(v) for v in edge.sources)
                              + (key(edge.result),), owner.name, owner.mlir.location, manual,
                              dimless(list(edge.sources) + [edge.result]), f"o{owner.oid}"))
            continue
        if name == "sdy.func_data_flow_edge":
            if func_edges is None:
                func_edges = func_edge_sources(module, call_sites(module))
            sources = list(func_edges.get(op.oid, ()))
            links.append(Link(f"o{op.oid}", name, tuple(key(v) for v in sources)
                              + (key(op.results[0]),), **_func_edge_owner(op),
                              dimless=dimless(sources + op.results)))
            continue
        tensors = op.operands + op.results
        if tensors:
            links.append(Link(f"o{op.oid}", name, tuple(key(v) for v in tensors),
                              dimless=dimless(tensors)))
    return links


def _func_edge_owner(op) -> dict:
    """A function data-flow edge's owner (the function of the argument it wraps, or
    the call of the result), its location (the edge's own: the function's or the
    call's), tag and which edge it is (``@f argument 0``,
    ``@f result 0``)."""
    from jaxlib.mlir import ir

    wrapped = op.operands[0]
    if wrapped.is_block_arg:
        owner = wrapped.block.region.owner
        callee = ir.StringAttr(owner.attr("sym_name")).value
        which = f"argument {wrapped.index}"
    else:
        owner = wrapped.defining_op
        callee = ir.FlatSymbolRefAttr(owner.attr("callee")).value
        which = f"result {wrapped.index}"
    return {"owner": owner.name, "owner_loc": op.mlir.location, "owner_tag": f"o{owner.oid}",
            "edge": f"@{callee} {which}"}
