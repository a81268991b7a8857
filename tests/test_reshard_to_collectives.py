"""reshard-to-collectives against jaxlib's ``func.func(sdy-reshard-to-collectives)``
(and ``propagate --explicit-collectives`` against jaxlib's pipeline followed by
the two passes it adds): hand-written reshards (all-gather, all-slice,
all-to-all, collective-permute, their combinations, sub-axes, meshes that
differ in device order or axes, barriers, nested regions), reshards inserted
into real JAX programs after propagation, and the errors.

Shardy's lit inputs for the pass run in ``test_lit_passes.py``.
"""

from __future__ import annotations

import random
import shutil

import pytest
from click.testing import CliRunner

from oracle import Failure, assert_same, normalize, ours, outcome, shardy
from sdy_dl.cli import main
from sdy_dl.ir import parse_module_text
from sdy_dl.pipeline import make_options, propagate

PASS = "func.func(sdy-reshard-to-collectives)"
KEEP = "func.func(sdy-reshard-to-collectives{keep-redundant-reshards=true})"
#: What ``propagate --explicit-collectives`` runs, as jaxlib passes.
EXPLICIT = ("sdy-propagation-pipeline,func.func(sdy-insert-explicit-reshards{enable-full-version=true}),"
            + PASS)

M3 = 'sdy.mesh @mesh = <["x"=2, "y"=2, "z"=2]>\n'


def one(mesh: str, ty: str, arg_sharding: str | None, *targets: str, name: str = "main") -> str:
    """A function whose argument (sharded ``arg_sharding``) goes through a chain of
    reshards to ``targets``."""
    argattr = f' {{sdy.sharding = #sdy.sharding<{arg_sharding}>}}' if arg_sharding else ""
    body, prev = [], "%arg0"
    for i, t in enumerate(targets):
        body.append(f"  %{i} = sdy.reshard {prev} <{t}> : {ty}")
        prev = f"%{i}"
    return (mesh + f"func.func @{name}(%arg0: {ty}{argattr}) -> {ty} {{\n" + "\n".join(body)
            + f"\n  return {prev} : {ty}\n}}\n")


T2 = "tensor<16x8xf32>"
T3 = "tensor<8x8x8xf32>"
#: name -> module; every reshard in it is compared with jaxlib's pass.
CASES = {
 "all_gather": one(M3, T2, '@mesh, [{"x", "y"}, {}]', '@mesh, [{"x"}, {}]'),
 "all_slice": one(M3, T2, '@mesh, [{}, {}]', '@mesh, [{"x"}, {"y", "z"}]'),
 "all_to_all": one(M3, T2, '@mesh, [{"x"}, {}]', '@mesh, [{}, {"x"}]'),
 "collective_permute": one(M3, T2, '@mesh, [{"x"}, {}]', '@mesh, [{"y"}, {}]'),
 "permute_order": one(M3, T2, '@mesh, [{"x", "y"}, {}]', '@mesh, [{"y", "x"}, {}]'),
 "combination": one(M3, T3, '@mesh, [{"x"}, {"y"}, {}]', '@mesh, [{}, {"x"}, {"y", "z"}]',
                    '@mesh, [{"z"}, {}, {}]', '@mesh, [{}, {}, {}]'),
 "gather_and_slice": one(M3, T3, '@mesh, [{"x", "y"}, {}, {}]', '@mesh, [{}, {"z"}, {"x"}]'),
 "all_to_all_two_dims": one(M3, T3, '@mesh, [{"y"}, {"x"}, {}]', '@mesh, [{}, {}, {"x", "y"}]'),
 "sub_axes": one('sdy.mesh @mesh = <["x"=4, "y"=2]>\n', T2, '@mesh, [{"x":(1)2}, {}]',
                 '@mesh, [{}, {"x"}]', '@mesh, [{"x":(2)2}, {"x":(1)2, "y"}]', '@mesh, [{"y"}, {}]'),
 "sub_axes_split": one('sdy.mesh @mesh = <["x"=8]>\n', "tensor<16x16xf32>", '@mesh, [{"x"}, {}]',
                       '@mesh, [{"x":(1)2}, {"x":(2)4}]', '@mesh, [{"x":(4)2}, {"x":(1)4}]'),
 "non_divisible": one('sdy.mesh @mesh = <["x"=3, "y"=2]>\n', "tensor<6x4xf32>", '@mesh, [{"x"}, {}]',
                      '@mesh, [{"y"}, {"x"}]', '@mesh, [{"x", "y"}, {}]'),
 "mesh_of_six": one('sdy.mesh @mesh = <["x"=6, "y"=4]>\n', "tensor<24x12xf32>",
                    '@mesh, [{"x"}, {"y"}]', '@mesh, [{"y"}, {"x"}]'),
 "missing_input_sharding": one(M3, T2, None, '@mesh, [{"x"}, {"y"}]'),
 "replicated_to_replicated": one(M3, T2, '@mesh, [{}, {?}]', '@mesh, [{}, {}]'),
 "to_replicated": one(M3, T2, '@mesh, [{"x"}, {"y"}]', '@mesh, [{?}, {}]'),
 "open_and_replicated_axes": one(M3, T2, '@mesh, [{"x", ?}, {}], replicated={"y"}', '@mesh, [{"y", ?}, {}]'),
 "equivalent": one(M3, T2, '@mesh, [{"x"}, {}]', '@mesh, [{"x", ?}, {}]'),
 "unreduced": one(M3, T2, '@mesh, [{"x"}, {}], unreduced={"z"}', '@mesh, [{}, {"x", "y"}], unreduced={"z"}'),
 "device_order": one('sdy.mesh @m1 = <["x"=2, "y"=2]>\nsdy.mesh @m2 = <["x"=2, "y"=2], device_ids=[3, 2, 1, 0]>\n',
                     T2, '@m1, [{"x"}, {}]', '@m2, [{"x"}, {}]', '@m2, [{}, {"y"}]', '@m1, [{}, {}]'),
 "other_mesh_kept": one('sdy.mesh @m1 = <["x"=2, "y"=2]>\nsdy.mesh @m3 = <["z"=4]>\n',
                        T2, '@m1, [{"x"}, {}]', '@m3, [{"z"}, {}]', '@m3, [{}, {}]'),
 # Chains: a reshard reads its input as the conversion of the one before left it.
 "chain_after_erased": one('sdy.mesh @m1 = <["x"=2, "y"=2]>\nsdy.mesh @m2 = <["x"=2, "y"=2], device_ids=[3, 2, 1, 0]>\n',
                           T2, '@m2, [{}, {}]', '@m1, [{}, {?}]', '@m1, [{"x"}, {}]', '@m2, [{?}, {}]', '@m2, [{"y"}, {"x"}]'),
 "chain_through_barrier": M3 + '''func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<16x8xf32> {
  %0 = sdy.reshard %arg0 <@mesh, [{?}, {}]> : tensor<16x8xf32>
  %1 = sdy.propagation_barrier %0 allowed_direction=BACKWARD : tensor<16x8xf32>
  %2 = sdy.reshard %1 <@mesh, [{"z"}, {"x"}]> : tensor<16x8xf32>
  return %2 : tensor<16x8xf32>
}
''',
 "three_meshes": one('sdy.mesh @a = <["x"=2, "y"=4]>\nsdy.mesh @b = <["x"=2, "y"=4], device_ids=[7, 6, 5, 4, 3, 2, 1, 0]>\nsdy.mesh @c = <["y"=4, "x"=2]>\n',
                     "tensor<8x16xf32>", '@a, [{"y"}, {"x"}]', '@b, [{"x", "y"}, {}]', '@c, [{"y"}, {}]'),
}
CASES["barrier"] = M3 + '''func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<16x8xf32> {
  %0 = sdy.propagation_barrier %arg0 allowed_direction=NONE : tensor<16x8xf32>
  %1 = sdy.reshard %0 <@mesh, [{"y"}, {"z"}]> : tensor<16x8xf32>
  return %1 : tensor<16x8xf32>
}
'''
CASES["op_results_and_nested"] = M3 + '''func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<16x8xf32> {
  %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x", "y"}, {}]>]>} : tensor<16x8xf32>
  %1 = sdy.reshard %0 <@mesh, [{}, {"x", "y"}]> : tensor<16x8xf32>
  %c = stablehlo.constant dense<0> : tensor<i32>
  %2:2 = stablehlo.while(%iterArg = %1, %iterArg_0 = %c) : tensor<16x8xf32>, tensor<i32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"z"}, {"x"}]>, <@mesh, []>]>}
    cond {
      %3 = stablehlo.compare LT, %iterArg_0, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    } do {
      %3 = sdy.reshard %iterArg <@mesh, [{}, {"x", "z"}]> : tensor<16x8xf32>
      %4 = stablehlo.add %3, %3 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x", "z"}]>]>} : tensor<16x8xf32>
      %5 = sdy.reshard %4 <@mesh, [{"z"}, {"x"}]> : tensor<16x8xf32>
      stablehlo.return %5, %iterArg_0 : tensor<16x8xf32>, tensor<i32>
    }
  return %2#0 : tensor<16x8xf32>
}
'''
CASES["manual_computation"] = M3 + '''func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}, {}]>}) -> tensor<16x8xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x", "y"}, {}]>] out_shardings=[<@mesh, [{"x", "z"}, {}]>] manual_axes={"x"} (%a: tensor<8x8xf32>) {
    %1 = sdy.reshard %a <@mesh, [{"z"}, {}]> : tensor<8x8xf32>
    %2 = stablehlo.negate %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"z"}, {"y"}]>]>} : tensor<8x8xf32>
    %3 = sdy.reshard %2 <@mesh, [{}, {"z", "y"}]> : tensor<8x8xf32>
    %4 = sdy.reshard %3 <@mesh, [{"z"}, {}]> : tensor<8x8xf32>
    sdy.return %4 : tensor<8x8xf32>
  } : (tensor<16x8xf32>) -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}
'''
CASES["two_functions"] = M3 + '''func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<16x8xf32> {
  %0 = sdy.reshard %arg0 <@mesh, [{"y"}, {"x"}]> : tensor<16x8xf32>
  %1 = call @f(%0) : (tensor<16x8xf32>) -> tensor<16x8xf32>
  return %1 : tensor<16x8xf32>
}
func.func private @f(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {"x"}]>}) -> tensor<16x8xf32> {
  %0 = sdy.reshard %arg0 <@mesh, [{"z", "y"}, {}]> : tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}
'''


@pytest.mark.parametrize("keep", [False, True], ids=["default", "keep-redundant-reshards"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_jaxlib(name, keep):
    text = CASES[name]
    expected = shardy(text, KEEP if keep else PASS)
    actual = normalize(ours(text, "reshard-to-collectives", engine="clingo",
                            options={"keep_redundant_reshards": keep}))
    assert_same(expected, actual)


def test_every_collective_is_covered():
    """The hand-written cases produce every collective the pass creates."""
    seen = set()
    for text in CASES.values():
        seen |= {op for op in ("sdy.all_gather", "sdy.all_slice", "sdy.all_to_all",
                               "sdy.collective_permute")
                 if op in ours(text, "reshard-to-collectives", engine="clingo")}
    assert len(seen) == 4


#: Inlined meshes: jaxlib 0.10.2's pass crashes on them, so sdy-dl's result on an
#: inlined mesh is compared with jaxlib's on the same mesh declared as a symbol.
INLINED = [('[{"a"}, {}]', '[{"b"}, {"a"}]'), ('[{"a"}, {}]', '[{}, {}]'),
           ('[{}, {}]', '[{"a", "b"}, {}]')]


@pytest.mark.parametrize("source, target", INLINED)
def test_inlined_mesh_as_named(source, target):
    inlined = 'mesh<["a"=2, "b"=2]>'
    named = one('sdy.mesh @m = <["a"=2, "b"=2]>\n', T2, f"@m, {source}", f"@m, {target}")
    expected = shardy(named, PASS).replace("@m,", inlined + ",").replace(
        '  sdy.mesh @m = <["a"=2, "b"=2]>\n', "")
    actual = ours(one("", T2, f"{inlined}, {source}", f"{inlined}, {target}"),
                  "reshard-to-collectives", engine="clingo")
    assert_same(expected, normalize(actual))


@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")
@pytest.mark.parametrize("name", ["combination", "device_order", "other_mesh_kept", "equivalent",
                                  "replicated_to_replicated", "missing_input_sharding"])
def test_engines_agree(name):
    for keep in (False, True):
        extra = {"keep_redundant_reshards": keep}
        assert (ours(CASES[name], "reshard-to-collectives", engine="souffle", options=extra)
                == ours(CASES[name], "reshard-to-collectives", engine="clingo", options=extra))


# -- random reshards ------------------------------------------------------------------

#: How a mesh axis of each size may be split into sub-axes.
SPLITS = {2: [[2]], 3: [[3]], 4: [[4], [2, 2]], 6: [[6], [2, 3], [3, 2]],
          8: [[8], [2, 4], [4, 2], [2, 2, 2]]}


def _pieces(name: str, size: int, rng: random.Random) -> list[str]:
    """The axis ``name``, or some of its sub-axes (never two adjacent ones, which
    the verifier rejects as mergeable)."""
    split = rng.choice(SPLITS[size])
    if len(split) == 1:
        return [f'"{name}"']
    out, pre, kept = [], 1, False
    for s in split:
        kept = not kept and rng.random() < 0.6
        if kept:
            out.append(f'"{name}":({pre}){s}')
        pre *= s
    return out


def _random_sharding(mesh, rank: int, rng: random.Random) -> str:
    pieces = [p for name, size in mesh for p in _pieces(name, size, rng)]
    rng.shuffle(pieces)
    dims: list[list[str]] = [[] for _ in range(rank)]
    for piece in pieces:
        d = rng.randrange(rank + 1)
        if d < rank:
            dims[d].append(piece)
    return "[" + ", ".join("{" + ", ".join(d) + "}" for d in dims) + "]"


def random_reshards(seed: int, count: int = 8) -> str:
    """A function with ``count`` arguments, each resharded to a random sharding, on a
    random mesh of two or three axes (sizes 2, 3, 4, 6, 8, sub-axes included); some
    arguments have no sharding, some targets are on the mesh with its device ids
    reversed."""
    rng = random.Random(seed)
    mesh = [(name, rng.choice([2, 2, 4, 4, 8, 3, 6])) for name in ["x", "y", "z"][:rng.choice([2, 3])]]
    axes = ", ".join(f'"{n}"={s}' for n, s in mesh)
    devices = 1
    for _, size in mesh:
        devices *= size
    args, body, types = [], [], []
    for i in range(count):
        rank = rng.choice([1, 2, 3])
        ty = "tensor<" + "x".join(str(rng.choice([4, 8, 12, 16, 24, 48])) for _ in range(rank)) + "xf32>"
        source, target = _random_sharding(mesh, rank, rng), _random_sharding(mesh, rank, rng)
        attr = ("" if rng.random() < 0.1
                else f" {{sdy.sharding = #sdy.sharding<@mesh, {source}>}}")
        args.append(f"%arg{i}: {ty}{attr}")
        target_mesh = "@reversed" if rng.random() < 0.25 else "@mesh"
        body.append(f"  %{i} = sdy.reshard %arg{i} <{target_mesh}, {target}> : {ty}")
        types.append(ty)
    reversed_ids = ", ".join(str(d) for d in reversed(range(devices)))
    return (f"sdy.mesh @mesh = <[{axes}]>\n"
            + f"sdy.mesh @reversed = <[{axes}], device_ids=[{reversed_ids}]>\n"
            + f"func.func @main({', '.join(args)}) -> ({', '.join(types)}) {{\n"
            + "\n".join(body) + f"\n  return {', '.join(f'%{i}' for i in range(count))} : "
            + ", ".join(types) + "\n}\n")


def random_differences(seeds) -> tuple[list[int], int]:
    """(seeds whose module differs from jaxlib's, how many modules both converted)."""
    differ, converted = [], 0
    for seed in seeds:
        text = random_reshards(seed)
        expected = outcome(lambda: shardy(text, PASS), text)
        actual = outcome(lambda: normalize(ours(text, "reshard-to-collectives", engine="clingo")),
                         text)
        converted += not isinstance(expected, Failure)
        if expected != actual:
            differ.append(seed)
    return differ, converted


def test_random_reshards():
    differ, converted = random_differences(range(40))
    assert not differ and converted >= 30


@pytest.mark.slow
def test_random_reshards_many():
    differ, converted = random_differences(range(40, 1040))
    assert not differ and converted >= 800


@pytest.mark.souffle
@pytest.mark.skipif(shutil.which("souffle") is None, reason="souffle is not on PATH")
def test_engines_agree_on_random_reshards():
    for seed in range(5):
        text = random_reshards(seed)
        assert (outcome(lambda: ours(text, "reshard-to-collectives", engine="souffle"), text)
                == outcome(lambda: ours(text, "reshard-to-collectives", engine="clingo"), text))


# -- reshards inserted into real programs ------------------------------------------


def with_random_reshards(text: str, seed: int) -> tuple[str, int]:
    """``text`` (a propagated module) with an ``sdy.reshard`` to a random sharding
    after every op result that has a sharding (outside manual computations, no
    unreduced axes), and the number inserted."""
    from jaxlib.mlir import ir

    from sdy_dl.ir.context import mlir_context
    from sdy_dl.ir.meshes import module_meshes
    from sdy_dl.ir.mlir_ops import funcs
    from sdy_dl.ir.walk import walk_pre
    from sdy_dl.ir.sdy_attrs import per_value_of_attr
    from sdy_dl.sharding import AxisRef, DimSharding, TensorSharding, merge_adjacent

    rng = random.Random(seed)
    count = 0
    wrapped = parse_module_text(text, "<test>")
    with mlir_context():
        meshes = module_meshes(wrapped)
        for func in funcs(wrapped):
            for mop in walk_pre(func):
                if ("sdy.sharding" not in mop.attributes or len(mop.results) != 1
                        or mop.name.startswith("sdy.") or _in_manual(mop)):
                    continue
                (sharding,) = per_value_of_attr(mop.attributes["sdy.sharding"])
                mesh = meshes.get(sharding.mesh)
                result = mop.results[0]
                shape = ir.RankedTensorType(result.type).shape
                if sharding.unreduced or mesh is None or not shape:
                    continue
                pieces = []
                for axis in mesh.axes:
                    if axis.size == 4 and rng.random() < 0.4:
                        pieces += [AxisRef(axis.name, 1, 2), AxisRef(axis.name, 2, 2)]
                    else:
                        pieces.append(AxisRef(axis.name))
                rng.shuffle(pieces)
                dims = [[] for _ in shape]
                for piece in pieces:
                    d = rng.randrange(len(shape) + 1)
                    if d < len(shape):
                        dims[d].append(piece)
                target = TensorSharding(sharding.mesh, tuple(
                    DimSharding(tuple(merge_adjacent(axes, mesh)), True) for axes in dims))
                reshard = ir.Operation.create(
                    "sdy.reshard", results=[result.type], operands=[result],
                    attributes={"sharding": ir.Attribute.parse(target.to_text())},
                    loc=mop.location)
                ir.InsertionPoint.after(mop).insert(reshard)
                count += 1
        return wrapped.print(), count


def _in_manual(mop) -> bool:
    parent = mop.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "sdy.manual_computation":
            return True
        parent = parent.parent
    return False


PROGRAMS = ["mlp", "attention", "training_step", "convnet", "reductions_reshapes",
            "gather_scatter"]


@pytest.mark.parametrize("program", PROGRAMS)
def test_jax_program_with_reshards(program):
    from jax_programs import lowered

    propagated = shardy(lowered(program), "sdy-propagation-pipeline")
    text, count = with_random_reshards(propagated, seed=len(program))
    assert count >= 3
    assert_same(shardy(text, PASS), normalize(ours(text, "reshard-to-collectives",
                                                   engine="clingo")))


# -- propagate --explicit-collectives -------------------------------------------

def explicit(text: str) -> str:
    module = parse_module_text(text, "<test>")
    options = make_options({"enable_insert_explicit_collectives": True}, engine="clingo")
    return normalize(propagate(module, options).print())


PIPELINE_CASES = {
    "constraints": M3 + '''func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x", "z"}]>}) {
  %0 = stablehlo.negate %arg0 : tensor<16x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{"y"}, {"x"}]> : tensor<16x8xf32>
  %2 = stablehlo.abs %1 : tensor<16x8xf32>
  return %2 : tensor<16x8xf32>
}
''',
    "reshards": CASES["combination"],
    "device_order": CASES["device_order"],
}


@pytest.mark.parametrize("name", sorted(PIPELINE_CASES))
def test_propagate_explicit_collectives(name):
    text = PIPELINE_CASES[name]
    assert_same(shardy(text, EXPLICIT), explicit(text))


@pytest.mark.parametrize("program", ["mlp", "sharding_constraint", "while_loop"])
def test_propagate_explicit_collectives_on_jax_programs(program):
    from jax_programs import lowered

    text = lowered(program)
    assert_same(shardy(text, EXPLICIT), explicit(text))


# -- errors ------------------------------------------------------------------------

def cli(tmp_path, text: str, *args: str):
    path = tmp_path / "m.mlir"
    path.write_text(text)
    out = tmp_path / "out.mlir"
    result = CliRunner().invoke(main, [*[a.format(m=path, out=out) for a in args]])
    return result, path, out


def one_line_error(result, code: int, *words: str) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sdy-dl: error: "), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


SINGLE_DEVICE = ('sdy.mesh @mesh = <["x"=2, "y"=2]>\nsdy.mesh @one = <[], device_ids=[0]>\n'
                 'func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@one, []>})'
                 ' -> tensor<16x8xf32> {\n'
                 '  %0 = sdy.reshard %arg0 <@mesh, [{}, {}]> : tensor<16x8xf32>\n'
                 '  return %0 : tensor<16x8xf32>\n}\n')


def test_single_device_mesh_is_an_error_as_in_jaxlib(tmp_path):
    with pytest.raises(Exception, match="failed to legalize"):
        shardy(SINGLE_DEVICE, PASS)
    result, path, out = cli(tmp_path, SINGLE_DEVICE, "pass", "reshard-to-collectives", "{m}",
                            "-o", "{out}")
    one_line_error(result, 1, f"{path}:4:8:", "different ranks")
    assert not out.exists()
    # To a sharded target the meshes differ in their axes: the reshard stays.
    kept = SINGLE_DEVICE.replace('<@mesh, [{}, {}]>', '<@mesh, [{"x"}, {}]>')
    assert_same(shardy(kept, PASS), normalize(ours(kept, "reshard-to-collectives")))


def test_unreduced_mismatch_is_an_error(tmp_path):
    text = one(M3, T2, '@mesh, [{"x"}, {}], unreduced={"z"}', '@mesh, [{}, {"x"}]')
    result, path, out = cli(tmp_path, text, "pass", "reshard-to-collectives", "{m}", "-o", "{out}")
    one_line_error(result, 1, f"{path}:3:8:", "unreduced axes differ")
    assert not out.exists()


@pytest.mark.parametrize("args, words", [
    (["pass", "reshard-to-collectives", "{m}", "--pass-option", "keep-redundant-reshards=maybe"],
     ["keep-redundant-reshards", "maybe", "true or false"]),
    (["pass", "reshard-to-collectives", "{m}", "--pass-option", "keep-redundant=true"],
     ["no option", "keep-redundant-reshards"]),
    (["propagate", "{m}", "--quiet", "--pass-option", "enable-insert-explicit-collectives=2"],
     ["enable-insert-explicit-collectives", "true or false"]),
])
def test_bad_options_are_usage_errors(tmp_path, args, words):
    result, _, _ = cli(tmp_path, CASES["all_to_all"], *args)
    one_line_error(result, 2, *words)


def test_cli_explicit_collectives_flag(tmp_path):
    result, _, out = cli(tmp_path, PIPELINE_CASES["reshards"], "propagate", "{m}", "--quiet",
                         "--explicit-collectives", "-o", "{out}")
    assert result.exit_code == 0, result.output
    assert "sdy.reshard" not in out.read_text() and "sdy.all_" in out.read_text()
    same, _, out2 = cli(tmp_path, PIPELINE_CASES["reshards"], "propagate", "{m}", "--quiet",
                        "--pass-option", "enable-insert-explicit-collectives=true", "-o", "{out}")
    assert same.exit_code == 0 and out2.read_text() == out.read_text()


# -- propagate --explicit-collectives on Shardy's lit inputs -----------------------

#: Lit files of whole-pipeline inputs (read from a Shardy source tree, not copied).
PIPELINE_LIT = {"propagation_pipeline.mlir": "shardy/dialect/sdy/transforms/propagation/test",
                "propagation_pipeline_data_flow_edges.mlir":
                    "shardy/dialect/sdy/transforms/propagation/test",
                "insert_explicit_reshards.mlir": "shardy/dialect/sdy/transforms/export/test"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PIPELINE_LIT))
def test_propagate_explicit_collectives_on_lit_inputs(name):
    """Every chunk jaxlib accepts must be equal."""
    from shardy_source import lit_or_skip
    from test_lit_passes import chunk_name, chunks_of

    text = lit_or_skip(name, PIPELINE_LIT[name])
    differ, compared = [], 0
    for i, chunk in enumerate(chunks_of(text)):
        expected = outcome(lambda: shardy(chunk, EXPLICIT), chunk)
        if isinstance(expected, Failure):
            continue
        compared += 1
        if outcome(lambda: explicit(chunk), chunk) != expected:
            differ.append(chunk_name(chunk, i))
    assert not differ and compared >= 20, (differ, compared)
