"""Attributes jaxlib's Python bindings cannot hand to Python.

The bindings turn every attribute into its most specific Python class; a
``dense<...>`` of complex numbers (``tensor<complex<f32>>``) has none and
reading it raises ``TypeError`` (``NamedAttribute.attr`` even aborts the
process).  Such attributes can only travel as text: these functions read an
op's attributes without touching them and re-create an op from its printed
generic form.
"""

from __future__ import annotations


def readable_attributes(mop) -> dict:
    """``{name: attribute}`` of ``mop``, leaving out the ones the bindings cannot read."""
    attrs = mop.operation.attributes
    try:
        return dict(attrs.items())
    except TypeError:   # one of them is unreadable: read them one by one
        pass
    out = {}
    for name in attrs:
        try:
            out[name] = attrs[name]
        except TypeError:
            continue
    return out


def recreate_renamed(mop, new_name: str):
    """A detached copy of the region-free, operand-free op ``mop`` named
    ``new_name``: same attributes (in their order), result types and location."""
    from jaxlib.mlir import ir

    op = mop.operation
    if op.operands or op.regions:
        raise ValueError(f"cannot re-create {op.name}")
    try:
        attrs = {n: op.attributes[n] for n in op.attributes}
    except TypeError:  # an attribute only text can carry
        text = op.get_asm(print_generic_op_form=True, enable_debug_info=True,
                          use_local_scope=True)
        return ir.Operation.parse(f'"{new_name}"' + text.partition(f'"{op.name}"')[2])
    return ir.Operation.create(new_name, results=[r.type for r in op.results],
                               attributes=attrs, loc=op.location)


def attribute_dict_key(mop):
    """``mop``'s attribute dictionary as a key, equal for two ops exactly when
    their attributes are: the ``(name, attribute)`` pairs sorted by name
    (attributes are uniqued in sdy-dl's one context, so they compare as objects,
    like Shardy's ``DictionaryAttr``), or, when the bindings cannot read one of
    them, the generic form after the operand list."""
    try:
        return tuple(sorted(mop.operation.attributes.items()))   # (names are unique)
    except TypeError:
        text = mop.operation.get_asm(print_generic_op_form=True, skip_regions=True,
                                     use_local_scope=True)
        return "generic:" + text[text.index(")", text.index(f'"{mop.operation.name}"')) + 1:]
