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


def test_results_trees_and_conflicts_print_as_the_cli_does_and_show_in_jupyter(tmp_path):
    from click.testing import CliRunner

    from sdy_dl.audit.render import text_lines
    from sdy_dl.cli import main

    result = sdy_dl.propagate(WITHIN, engine="clingo")
    assert str(result) == result.text
    assert repr(result).startswith(f"<PropagationResult of <string>: {len(result.values())} values")
    page = result._repr_html_()
    assert page.count("<tr>") == len(result.values()) + 1
    assert all(f"<code>{name}</code>" in page for name in result.values())
    tree = result.explain("%0")
    assert str(tree) == "\n".join(text_lines(tree)) and str(tree).startswith("%0 = (none)\n   because: ")
    assert "because:" in tree._repr_html_() and "<code>%0</code>" in tree._repr_html_()
    path = tmp_path / "m.mlir"
    path.write_text(WITHIN)
    cli = CliRunner().invoke(main, ["conflicts", str(path), "--engine", "clingo", "--quiet"])
    conflicts = result.conflicts()
    assert [c.kind for c in conflicts] == ["within-factor"]   # still a list of Conflict
    assert str(conflicts) + "\n" == cli.output and str(conflicts).startswith("1 conflicts in 1 pattern")
    assert conflicts._repr_html_().startswith("<pre>")


def test_jax_explain_takes_propagates_options(monkeypatch):
    import jax

    jitted = jax.jit(lambda x: x * 2.0, in_shardings=jax_programs._ns("data", None))
    seen = {}
    real = sdy_dl.jax.propagate

    def spy(text, **options):
        seen.update(options)
        return real(text, **options)
    monkeypatch.setattr(sdy_dl.jax, "propagate", spy)
    options = {"propagation-strategy": "basic"}
    result = sdy_dl.jax.explain(jitted, jax_programs._f32(8, 4), engine="clingo",
                                pass_options=options, keep_sharding_rules=True)
    assert seen["engine"] == "clingo" and seen["pass_options"] == options
    assert seen["keep_sharding_rules"] is True and "sdy.sharding_rule" in result.text
    assert result.sharding("result:0") == '#sdy.sharding<@mesh, [{"data"}, {}]>'
