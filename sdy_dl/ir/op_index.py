"""The op index: a module's ops in walk order, walked once, and their names.

The part of the module view (:class:`~sdy_dl.ir.model.Module`, its
``walks``) that passes read raw MLIR ops through.  A walk through the
bindings costs about a microsecond per op (one Python object per op), and
the pipeline's passes read a module's ops some twenty times.  The index
keeps, per top-level op (function, mesh, ...) and walk order, the ops of
that op's subtree (itself included) and their names, from one walk the
first time they are asked for, and the names of all the module's ops
(:func:`op_names`); the queries below read it.

It is valid while the module's ops are: a pass asks it before its first
insertion, erasure or move of an op (afterwards it walks the MLIR itself).
``Module.invalidate`` keeps it only when the pass kept it valid
(``ops_kept``):

* passes that edit attributes only (and flatten-call-graph, which adds
  copies of functions);
* symbol-dce forgets the functions it erases (:meth:`OpIndex.forget`; walks
  are found by the address of their top-level op, which an op created after
  an erasure may reuse), the constant merger takes the constants it erases
  out of its walks (:meth:`OpIndex.drop_erased`), and the splitter's
  renaming of constants changes the walks alike (:meth:`OpIndex.replace`);
* propagation gives the index its model read (:meth:`OpIndex.from_model`).

Every other edit drops it.
"""

from __future__ import annotations

from sdy_dl.ir.walk import key, walk_post, walk_pre


class OpIndex:
    """Per (top-level op, order): the walk of the op's subtree and the names of its ops."""

    def __init__(self, names: frozenset[str] | None = None):
        #: (key of a top-level op, post-order) -> (its walk, their names)
        self._walks: dict[tuple[int, bool], tuple[list, list[str]]] = {}
        #: key of a top-level op -> the model ops of its subtree, in pre-order, whose
        #: walks are made when first asked for (:meth:`from_model`)
        self._model: dict[int, list] = {}
        #: The names of the module's ops, once read (:func:`op_names`; maybe more,
        #: see there).
        self.names = names

    @classmethod
    def from_model(cls, module, erased: set[int]) -> "OpIndex":
        """The op index of ``module`` read from its model ops instead of the MLIR
        (each top-level op's walks made from them when first asked for: a what-if's
        propagated module, whose output is made by difference, is not walked);
        the ops of ``erased`` (oids) were erased from the MLIR since the model
        was read, with what they held."""
        index = cls()
        ops = module.ops
        gone = set(erased)   # (and the ops nested in them: parents come first)
        if gone:
            for op in ops:
                if op.parent is not None and op.parent.oid in gone:
                    gone.add(op.oid)
        tops = [op.oid for op in ops if op.parent is None] + [len(ops)]
        for start, end in zip(tops, tops[1:]):
            if start in gone:
                continue
            # (a top-level op's subtree is its run of the model's pre-order)
            pre = [op for op in ops[start:end] if op.oid not in gone] if gone else ops[start:end]
            index._model[key(ops[start].mlir)] = pre
        return index

    def _read_model(self, k: int) -> None:
        """Make both walks of top-level op ``k`` from its model ops (:meth:`from_model`)."""
        pre = self._model.pop(k)
        post, open_ops = [], [pre[0]]
        for op in pre[1:]:
            while open_ops[-1] is not op.parent:
                post.append(open_ops.pop())
            open_ops.append(op)
        post.extend(reversed(open_ops))
        self._walks[(k, False)] = ([op.mlir for op in pre], [op.name for op in pre])
        self._walks[(k, True)] = ([op.mlir for op in post], [op.name for op in post])

    def walk(self, top, post: bool = False) -> tuple[list, list[str]]:
        """(ops, their names) of ``top``'s subtree, ``top`` included, in pre-order
        (``post``: post-order).  The lists are shared: do not change them."""
        k = (key(top), post)
        found = self._walks.get(k)
        if found is None and k[0] in self._model:
            self._read_model(k[0])
            found = self._walks[k]
        if found is None:
            ops = walk_post(top) if post else walk_pre(top)
            found = self._walks[k] = (ops, [op.name for op in ops])
        return found

    def forget(self, keys) -> None:
        """The top-level ops of ``keys`` were erased: their walks are dropped."""
        for k in keys:
            self._walks.pop((k, False), None)
            self._walks.pop((k, True), None)
            self._model.pop(k, None)

    def drop_erased(self, ops, post: bool) -> None:
        """The ops ``ops``, without regions and taken from this index's walks in
        that order, were erased: they leave those walks, and the walks of the
        other order (other objects for the same ops) are dropped."""
        for k in list(self._model):
            self._read_model(k)
        gone = {id(op) for op in ops}
        for k, (walk, names) in list(self._walks.items()):
            if k[1] != post:
                del self._walks[k]
            elif any(id(op) in gone for op in walk):
                kept = [n for n, op in enumerate(walk) if id(op) not in gone]
                self._walks[k] = ([walk[n] for n in kept], [names[n] for n in kept])

    def replace(self, top, new_ops: dict, name: str) -> None:
        """The ops at the positions ``new_ops`` (position -> op) of ``top``'s
        pre-order walk, without regions, were replaced in place by those ops,
        called ``name``: the walk is changed alike, the post-order one dropped."""
        k = key(top)
        if k in self._model:
            self._read_model(k)
        ops, names = (list(w) for w in self._walks[(k, False)])
        for n, op in new_ops.items():
            ops[n], names[n] = op, name
        self._walks[(k, False)] = (ops, names)
        self._walks.pop((k, True), None)
        self.names = None   # (read again when asked for)

    def known(self, top, post: bool) -> bool:
        """Whether ``top``'s walk in that order has been read (or is made from the
        model when asked for)."""
        k = key(top)
        return (k, post) in self._walks or k in self._model

    def walk_read(self, top) -> tuple[list, list[str]]:
        """:meth:`walk` of ``top`` in the order already read (pre-order when both
        or neither are), for readers that take the ops in any order."""
        return self.walk(top, self.known(top, True) and not self.known(top, False))

    def named(self, top, names, post: bool = False) -> list:
        """The ops of ``top``'s subtree whose name is in ``names``, in walk order.
        Ops without regions keep their relative order in both walks, so a walk
        read in the other order serves when every op found has no region."""
        if not self.known(top, post) and self.known(top, not post):
            ops, op_names = self.walk(top, not post)
            found = [op for op, name in zip(ops, op_names) if name in names]
            if not any(len(op.regions) for op in found):
                return found
        ops, op_names = self.walk(top, post)
        return [op for op, name in zip(ops, op_names) if name in names]


def module_ops(module) -> list:
    """The top-level operations (meshes, functions, ...) of ``module`` (a
    :class:`~sdy_dl.ir.model.Module`)."""
    return [op.operation for op in module.mlir.body.operations]


def op_index(module) -> OpIndex:
    """The op index of ``module`` (its ``walks``)."""
    return module.walks


def ops_of(module, top, post: bool = False) -> list:
    """Every op of the top-level op ``top`` of ``module`` (itself included), in
    pre-order (``post``: post-order), as :func:`~sdy_dl.ir.walk.walk_pre`
    gives them.  A shared list: do not change it."""
    return op_index(module).walk(top, post)[0]


def ops_named(module, names, post: bool = False, top=None) -> list:
    """The ops of ``module`` (of its top-level op ``top`` only, when given) whose
    name is in ``names``, in pre-order (``post``: post-order), as
    :func:`~sdy_dl.ir.walk.walk_named` gives them."""
    index = op_index(module)
    if top is not None:
        return index.named(top, names, post)
    return [op for t in module_ops(module) for op in index.named(t, names, post)]


def names_of(module) -> frozenset[str]:
    """The names of all ops of ``module`` (the module op included)."""
    index = op_index(module)
    found = {"builtin.module"}
    for top in module_ops(module):
        found.update(index.walk_read(top)[1])
    return frozenset(found)


def op_names(module) -> frozenset[str]:
    """The names of the ops in ``module``, read from its op index once.

    Passes that edit the MLIR invalidate the module
    (:meth:`~sdy_dl.ir.model.Module.invalidate`), so the names stay those of
    the module until then; a pass looking for ops of some names returns at
    once, unchanged, when none is there (and the next such pass reads the
    same names).  A pass that only erases ops or copies existing ones keeps
    them (``ops_kept``): they may then name ops no longer there, never miss
    one, which is all such a test needs.
    """
    index = module.walks
    if index.names is None:
        index.names = names_of(module)
    return index.names


def may_hold(module, name: str) -> bool:
    """Whether ``module`` may hold ops called ``name``: False only when its op names
    are known already (:func:`op_names` read them since the module's last
    invalidation, or the pass that invalidated it gave the names its ops may
    have: ``Module.invalidate(names=...)``) and lack it."""
    names = module.walks.names
    return names is None or name in names
