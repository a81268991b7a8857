"""Every element type jaxlib prints, anywhere in the pipeline.

Constants, scalar broadcasts, selects and constraints of each element type
(complex numbers and the small float formats included) go through
``sdy-dl propagate`` and must equal ``sdy-propagation-pipeline``; every
registered pass must run on them.  jaxlib's Python bindings cannot hand a
complex ``dense<...>`` to Python, so these modules fail wherever a pass
reads attributes carelessly.
"""

from __future__ import annotations

import pytest

from oracle import assert_same, shardy
from sdy_dl.ir import parse_module_text
from sdy_dl.passes import get_pass
from sdy_dl.pipeline import make_options
from sdy_dl.pipeline import propagate

ELEMENT_TYPES = ["f32", "f64", "f16", "bf16", "i1", "i2", "i4", "i8", "i16", "i32", "i64",
                 "ui2", "ui4", "ui8", "ui16", "ui32", "ui64", "complex<f32>", "complex<f64>",
                 "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3B11FNUZ", "f8E3M4",
                 "f8E4M3", "f8E8M0FNU", "f4E2M1FN", "f6E2M3FN", "f6E3M2FN"]


def _literal(t: str) -> str:
    if t.startswith("complex"):
        return "(1.0,2.0)"
    if t == "i1":
        return "true"
    return "1" if t.startswith(("i", "ui")) else "1.0"


def element_type_module(types) -> str:
    """Per element type: two equal scalar constants broadcast, a full constant,
    selects and a constraint."""
    args, body, results = [], [], []
    for i, t in enumerate(types):
        v, tt = _literal(t), f"tensor<8x8x{t}>"
        args.append(f'%arg{i}: {tt} {{sdy.sharding = #sdy.sharding<@mesh, [{{"a"}}, {{}}]>}}')
        body += [f"%c{i} = stablehlo.constant dense<{v}> : tensor<{t}>",
                 f"%cc{i} = stablehlo.constant dense<{v}> : tensor<{t}>",
                 f"%b{i} = stablehlo.broadcast_in_dim %c{i}, dims = [] : (tensor<{t}>) -> {tt}",
                 f"%bb{i} = stablehlo.broadcast_in_dim %cc{i}, dims = [] : (tensor<{t}>) -> {tt}",
                 f"%k{i} = stablehlo.constant dense<{v}> : {tt}",
                 f"%s{i} = stablehlo.select %p, %arg{i}, %b{i} : tensor<8x8xi1>, {tt}",
                 f"%ss{i} = stablehlo.select %p, %s{i}, %k{i} : tensor<8x8xi1>, {tt}",
                 f"%sss{i} = stablehlo.select %p, %ss{i}, %bb{i} : tensor<8x8xi1>, {tt}",
                 f'%r{i} = sdy.sharding_constraint %sss{i} <@mesh, [{{}}, {{"b"}}]> : {tt}']
        results.append((f"%r{i}", tt))
    types_text = ", ".join(tt for _, tt in results)
    return (f'sdy.mesh @mesh = <["a"=2, "b"=4]>\n'
            f'func.func @main({", ".join(args)}, %p: tensor<8x8xi1>) -> ({types_text}) {{\n  '
            + "\n  ".join(body)
            + f'\n  return {", ".join(r for r, _ in results)} : {types_text}\n}}')


def complex_constant_program() -> str:
    """A JAX program with FFTs and a complex scalar constant (``x * (2+1j)``)."""
    import jax
    import jax.numpy as jnp

    from jax_programs import _f32, _ns

    def f(x):
        y = jnp.fft.ifft(x.astype(jnp.complex64) * (2 + 1j))
        return jnp.abs(jnp.fft.fft(x * 2.0)) + jnp.real(y)
    return jax.jit(f, in_shardings=_ns("data", None)).lower(_f32(8, 16)).as_text()


def test_pipeline_equals_shardy():
    text = element_type_module(ELEMENT_TYPES)
    actual = propagate(parse_module_text(text, "<test>"), make_options(engine="clingo")).print()
    assert_same(shardy(text, "sdy-propagation-pipeline"), actual)


def test_complex_constant_program_equals_shardy():
    text = complex_constant_program()
    assert "complex<f32>>" in text and "dense<(" in text
    actual = propagate(parse_module_text(text, "<test>"), make_options(engine="clingo")).print()
    assert_same(shardy(text, "sdy-propagation-pipeline"), actual)


def test_every_pass_runs_on_complex_constants():
    import sdy_dl.passes.all  # noqa: F401  (registers every pass)
    from sdy_dl.passes import PASSES

    text = element_type_module(["complex<f32>", "complex<f64>"])
    for name in sorted(PASSES):
        out = get_pass(name).run(parse_module_text(text, "<test>"), make_options(engine="clingo"))
        assert "tensor<8x8xcomplex<f64>>" in out.print(), name
