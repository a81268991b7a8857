"""Every walk of a module's ops, and the stable identity of MLIR objects.

* :func:`walk_pre`, :func:`walk_post`, :func:`walk_named`,
  :func:`walk_pre_not_into`: raw MLIR ops through MLIR's own walk (C++,
  nesting as deep as the parser does), as lists;
* :func:`walk_numbered`: the one order that numbers a module's ops and values,
  with the blocks between them (the model's ``oid``/``vid``, the audit's value
  keys, the stages' op numbers);
* :func:`walk_model`: the ops of the model (:mod:`sdy_dl.ir.model`) nested in one;
* :func:`key`: the identity passes key MLIR objects by while they edit the IR.

The walks a module has read are kept by its op index (:mod:`sdy_dl.ir.op_index`).
"""

from __future__ import annotations

from jaxlib.mlir import ir

from sdy_dl.signals import deferred


# -- stable identities -------------------------------------------------------------------

def _capsule_pointer():
    """``pointer(obj)``: the C++ pointer in ``obj._CAPIPtr`` (the capsule's name,
    one per Python class, is read once per class)."""
    import ctypes

    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    get_pointer, get_name = api.PyCapsule_GetPointer, api.PyCapsule_GetName
    names: dict = {}

    def pointer(obj) -> int:
        capsule = obj._CAPIPtr
        name = names.get(type(obj))
        if name is None:
            name = names[type(obj)] = get_name(capsule)
        return get_pointer(capsule, name)
    return pointer


_POINTER = None


def key(obj) -> int:
    """A stable identity for an MLIR operation, value or block.

    The bindings hash operations by content (the hash changes when an operand
    or attribute changes), so passes that mutate the IR key their dictionaries
    and sets by the underlying C++ pointer instead.  (A value's hash is its
    pointer's: a map keyed by values themselves is sound.)
    """
    global _POINTER
    if _POINTER is None:
        _POINTER = _capsule_pointer()
    return _POINTER(getattr(obj, "operation", obj))


# -- walks over raw MLIR operations -----------------------------------------------

def walk_pre(root) -> list:
    """Every operation nested in ``root`` (itself included) in pre-order (MLIR's
    own walk, which nests as deep as the parser does)."""
    return _walk(root, ir.WalkOrder.PRE_ORDER)


def walk_post(root) -> list:
    """Every operation nested in ``root`` (itself included) in post-order
    (MLIR's default ``walk``: regions first, then the op)."""
    return _walk(root, ir.WalkOrder.POST_ORDER)


#: The walk callbacks' answers (looked up once: a walk calls back per op).
_ADVANCE, _SKIP = ir.WalkResult.ADVANCE, ir.WalkResult.SKIP


def walk_named(root, names, post: bool = False) -> list:
    """The operations nested in ``root`` (itself included) whose name is in
    ``names``, in pre-order (``post``: post-order): one walk that keeps only those."""
    out: list = []
    append = out.append

    def visit(op):
        if op.name in names:
            append(op)
        return _ADVANCE
    _mlir_walk(root, visit, ir.WalkOrder.POST_ORDER if post else ir.WalkOrder.PRE_ORDER)
    return out


def walk_pre_not_into(root, name: str) -> list:
    """Like :func:`walk_pre`, without entering the regions of the ops nested in
    ``root`` that are called ``name`` (those ops are listed)."""
    out: list = []
    append = out.append

    def visit(op):
        append(op)  # root comes first: its own regions are entered
        return _SKIP if op.name == name and len(out) > 1 else _ADVANCE
    _mlir_walk(root, visit, ir.WalkOrder.PRE_ORDER)
    return out


def _walk(root, order) -> list:
    out: list = []
    append = out.append

    def visit(op):
        append(op)
        return _ADVANCE
    _mlir_walk(root, visit, order)
    return out


def _mlir_walk(root, visit, order) -> None:
    """MLIR's walk of ``root`` calling ``visit`` per op, no signal raised inside
    (the bindings would report it as an error of the visitor)."""
    with deferred:
        root.operation.walk(visit, order)


#: The events of :func:`walk_numbered`.
OP, BLOCK, END = 0, 1, 2


def walk_numbered(tops):
    """The ops ``tops`` and every op nested in them, in pre-order, as events in the
    one order that numbers a module's ops and values (the model's ``oid`` and
    ``vid``, and the audit's value keys, :class:`~sdy_dl.audit.naming.ValueTable`),
    each event with those numbers:

    * ``(OP, mop, n, v)``: the next op, op ``n``; its results are values ``v``,
      ``v + 1``, ...;
    * ``(BLOCK, r, mblock, v, n)``: the next block of op ``n``, the op whose
      regions are open (``r``: its region's number); its arguments are values
      ``v``, ``v + 1``, ...; its ops follow;
    * ``(END, mop)``: the regions of ``mop`` (an op with regions) are done.

    Iterative: nesting depth is not bounded by Python's recursion limit."""
    stack = [(iter(tops), None, -1)]
    n = v = 0
    while stack:
        items, owner, number = stack[-1]
        item = next(items, None)
        if item is None:
            stack.pop()
            if owner is not None:
                yield END, owner
            continue
        if type(item) is tuple:   # a block of owner, as (region number, block)
            block = item[1]
            yield BLOCK, item[0], block, v, number
            v += len(block.arguments)
            continue
        mop = item.operation
        yield OP, mop, n, v
        v += len(mop.results)
        if len(mop.regions):
            stack.append((_blocks_and_ops(mop), mop, n))
        n += 1


def _blocks_and_ops(mop):
    """Each block of ``mop``'s regions, as (region number, block), followed by its ops
    (a list: the bindings' op iterator starts again in each for loop)."""
    for r, region in enumerate(mop.regions):
        for block in region.blocks:
            yield r, block
            yield from list(block.operations)


def walk_model(op, enter=None):
    """``op`` and the model ops nested in it, as ``(op, True)`` in pre-order (when
    entered) and ``(op, False)`` in post-order (when left): the walk of model ops
    (and of :mod:`~sdy_dl.ir.op_view` views).  ``enter(op)``: whether to walk the
    regions of ``op`` (an op not entered is still listed).  Iterative: nesting
    depth is not bounded by Python's recursion limit."""
    stack = [(op, iter((op,)))]
    while stack:
        parent, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if stack:
                yield parent, False
            continue
        yield child, True
        if child.regions and (enter is None or enter(child)):
            stack.append((child, (o for region in child.regions for block in region.blocks
                                  for o in block.ops)))
        else:
            yield child, False
