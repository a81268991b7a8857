"""The Python API (``sdy_dl.propagate``) and the JAX API (``sdy_dl.jax.explain``)."""

from __future__ import annotations

import pytest

import jax_programs
import sdy_dl
import sdy_dl.jax
from sdy_dl.errors import SdyError
from sdy_dl.ir import parse_module_text
from sdy_dl.pipeline import make_options
from sdy_dl.pipeline import propagate as pipeline
from test_explain import CHAIN
from test_conflicts import WITHIN


def test_propagate_text_and_path(tmp_path):
    result = sdy_dl.propagate(CHAIN, engine="clingo")
    assert result.text == pipeline(parse_module_text(CHAIN), make_options(engine="clingo")).print()
    assert result.values() == ["%arg0", "%arg1", "%0", "%1", "result:0"]
    assert result.sharding("%1") == '#sdy.sharding<@mesh, [{"a"}, {}]>'
    tree = result.explain("%1")
    assert tree.sharding == result.sharding("%1") and tree.leaves()[0].what == "%arg0"
    path = tmp_path / "m.mlir"
    path.write_text(WITHIN)
    from_path = sdy_dl.propagate(str(path), engine="clingo")
    assert [c.kind for c in from_path.conflicts()] == ["within-factor"]
    with pytest.raises(SdyError, match="no value '%7'"):
        from_path.sharding("%7")


def test_jax_explain_names_arguments_and_python_lines():
    import jax
    import jax.numpy as jnp

    def f(params, x):
        w1, w2 = params
        return jnp.tanh(x @ w1) @ w2

    ns = jax_programs._ns
    jitted = jax.jit(f, in_shardings=((ns(None, "model"), ns("model", None)), ns("data", None)))
    args = ((jax_programs._f32(16, 32), jax_programs._f32(32, 16)), jax_programs._f32(8, 16))
    result = sdy_dl.jax.explain(jitted, *args, engine="clingo")
    assert result.sharding("params[1]") == '#sdy.sharding<@mesh, [{"model"}, {}]>'
    assert result.sharding("result") == '#sdy.sharding<@mesh, [{"data"}, {}]>'
    steps = [n for n in result.explain("result").walk() if n.kind == "step"]
    assert steps and all(n.op["place"].startswith("python ") and "test_api.py:" in n.op["place"]
                         for n in steps)
    leaves = result.explain("result").leaves()
    assert {leaf.what for leaf in leaves} == {"%arg0", "%arg2"}
    assert any("argument x" in leaf.because for leaf in leaves)
