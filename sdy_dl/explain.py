"""Provenance: why a value has its sharding, as a derivation tree.

A :class:`ProvenanceTracer` attached to a propagation records every sharding
write together with its cause: the step that derived it (the op, its rule,
the strategy and band, and the shardings of the op's tensors the step read),
a sharding-group copy, a user-priority rewrite, or a function-result sync.
:meth:`ProvenanceTracer.explain` turns the writes behind a value into a tree
whose leaves are the shardings the module started with (user annotations).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sdy_dl.sharding import TensorSharding


@dataclass
class Cause:
    """What made shardings change: one step or one rewrite."""

    index: int
    kind: str                      # "step", "edge", "barrier", "result", "group", "priority", "sync"
    label: str                     # e.g. "stablehlo.add (line 4)"
    detail: str = ""               # rule text, strategy, band
    inputs: list[tuple[object, TensorSharding | None]] = field(default_factory=list)


@dataclass
class Write:
    """One sharding write: ``key`` got ``sharding`` because of ``cause``."""

    key: object
    sharding: TensorSharding
    cause: Cause


@dataclass
class Node:
    """A node of a derivation tree."""

    what: str
    sharding: str
    because: str
    children: list["Node"] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"value": self.what, "sharding": self.sharding, "because": self.because,
                "from": [c.to_json() for c in self.children]}


class ProvenanceTracer:
    """Collects sharding writes with their causes during a propagation."""

    def __init__(self):
        self.writes: list[Write] = []
        self.initial: dict[object, TensorSharding | None] = {}
        self.names: dict[object, str] = {}
        self._cause: Cause | None = None
        self._count = 0

    # -- recording (called by the driver and the sharding state) ----------

    def begin(self, kind: str, label: str, detail: str = "", inputs=()) -> None:
        self._count += 1
        self._cause = Cause(self._count, kind, label, detail, list(inputs))

    def end(self) -> None:
        self._cause = None

    def on_read(self, key, sharding: TensorSharding | None) -> None:
        """The first read of ``key`` is its sharding in the module as given."""
        self.initial.setdefault(key, sharding)

    def on_write(self, key, sharding: TensorSharding) -> None:
        cause = self._cause or Cause(self._count, "sync", "pass start")
        self.writes.append(Write(key, sharding, cause))

    # -- explaining ----------------------------------------------------------

    def explain(self, key, name, max_depth: int = 8) -> Node | None:
        """The derivation tree of ``key``'s final sharding (None: it has none)."""
        return self._node(key, name, len(self.writes), max_depth, set())

    def _node(self, key, name, before: int, depth: int, seen: set) -> Node | None:
        write_at = next((i for i in range(before - 1, -1, -1) if self.writes[i].key == key), None)
        if write_at is None:
            initial = self.initial.get(key)
            if initial is None:
                return None
            return Node(name(key), initial.to_text(), "given in the module (user annotation)")
        write = self.writes[write_at]
        cause = write.cause
        because = f"{cause.label}" + (f" [{cause.detail}]" if cause.detail else "")
        node = Node(name(key), write.sharding.to_text(), because)
        marker = (key, write_at)
        if depth <= 0 or marker in seen:
            if cause.inputs:
                node.because += " (see above)" if marker in seen else " ..."
            return node
        seen.add(marker)
        first_write = next(i for i, w in enumerate(self.writes) if w.cause is cause)
        for input_key, sharding in cause.inputs:
            if input_key == key or sharding is None:
                continue
            child = self._node(input_key, name, first_write, depth - 1, seen)
            if child is not None:
                node.children.append(child)
        return node


def explain_value(module, value: str, options, depth: int = 8) -> Node:
    """Propagate ``module`` (the ``propagate`` pipeline) recording provenance and
    return the derivation tree of ``value`` (``%name`` or ``result:N``)."""
    import dataclasses

    from sdy_dl.errors import SdyError
    from sdy_dl.pipeline import propagate
    from sdy_dl.propagation.edges import find_edges, slot_map
    from sdy_dl.propagation.state import value_key

    tracer = ProvenanceTracer()
    result = propagate(module, dataclasses.replace(options, tracer=tracer))
    names = {value_key(v): v.name for v in result.values}
    main = result.main_func()
    n_results = len(main.mlir.attributes["function_type"].value.results) if main else 0
    names.update({("result", i): f"result:{i}" for i in range(n_results)})
    if value.startswith("result:") and value[7:].isdigit() and int(value[7:]) < n_results:
        key = ("result", int(value[7:]))
    else:
        matches = [v for v in result.values if v.name == value]
        if not matches:
            raise SdyError(f"no value {value!r} in the propagated module "
                           f"(use an SSA name such as %0 or %arg0, or result:N)", file=module.file)
        slots = slot_map(find_edges(result))
        target = matches[0]
        key = value_key(slots.get(target.vid, target))
    tree = tracer.explain(key, lambda k: names.get(k, "<erased value>"), max_depth=depth)
    if tree is None:
        return Node(value, "(none)", "no sharding was given or propagated")
    tree.what = value
    return tree
