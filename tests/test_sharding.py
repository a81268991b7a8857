"""Tests for sdy_dl.sharding: model, printer, parser and verifier.

jaxlib's sdy dialect is the oracle: our printed text must re-print
identically through ``ir.Attribute.parse``, and our verifier must accept and
reject the same shardings as the verifier jaxlib runs on a whole module.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdy_dl.errors import SdyError
from oracle import read_mesh
from sdy_dl.sharding import (AxisRef, DimSharding, Mesh, MeshAxis, merge_adjacent,
                             TensorSharding, format_symbol_ref, make_sub_axis, parse_axis_ref,
                             parse_tensor_sharding, quote_string)

# --------------------------------------------------------------------------
# jaxlib oracle
# --------------------------------------------------------------------------


def _ctx():
    from sdy_dl.ir.context import mlir_context
    return mlir_context()


def jax_print(text: str) -> str:
    """jaxlib's re-print of an attribute (raises if jaxlib rejects it)."""
    from jaxlib.mlir import ir
    with _ctx():
        return str(ir.Attribute.parse(text))


def jax_parses(text: str) -> bool:
    try:
        jax_print(text)
        return True
    except Exception:  # MLIRError / ValueError, depending on the version
        return False


def jax_module_error(sharding: TensorSharding, mesh: Mesh, rank: int) -> str | None:
    """Verify ``sharding`` on a rank-``rank`` func argument with jaxlib.

    Returns None when jaxlib accepts the module, else its error text.
    """
    from jaxlib.mlir import ir
    tensor = "tensor<" + "8x" * rank + "f32>"
    mesh_op = ""
    if sharding.mesh_name is not None:
        mesh_op = f"sdy.mesh {format_symbol_ref(sharding.mesh_name)} = {mesh.to_text()}\n"
    text = (f"module {{\n{mesh_op}"
            f"func.func @main(%arg0: {tensor} {{sdy.sharding = {sharding.to_text()}}})"
            f" -> {tensor} {{\n  return %arg0 : {tensor}\n}}\n}}")
    try:
        with _ctx():
            module = ir.Module.parse(text)
            module.operation.verify()
    except ir.MLIRError as e:
        return str(e)
    return None


# --------------------------------------------------------------------------
# Printing and parsing
# --------------------------------------------------------------------------

CANONICAL_SHARDINGS = [
    '#sdy.sharding<@mesh, []>',
    '#sdy.sharding<@mesh, [{"x", ?}, {}], replicated={"y"}>',
    '#sdy.sharding<@mesh, [{?}, {?}]>',
    '#sdy.sharding<@mesh, [{"x"}p2, {?}p0, {"y", ?}p1]>',
    '#sdy.sharding<@mesh, [{"x":(2)4, "y"}, {"x":(1)2}]>',
    '#sdy.sharding<@mesh, [{}], replicated={"x":(1)2, "y"}, unreduced={"z"}>',
    '#sdy.sharding<@mesh, [{"x"}], unreduced={"y", "z":(2)2}>',
    '#sdy.sharding<@mesh.a$b_c, [{"x"}]>',
    '#sdy.sharding<@"1mesh", [{"x"}]>',
    '#sdy.sharding<@"m x", [{"x y"}]>',
    '#sdy.sharding<@"a\\22b", [{"q\\22uote", "back\\\\slash"}]>',
    '#sdy.sharding<@mesh, [{"\\C3\\A9"}]>',
    '#sdy.sharding<@mesh, [{"x"}p9223372036854775807]>',
    '#sdy.sharding<mesh<["x"=2]>, [{"x"}]>',
    '#sdy.sharding<mesh<["x"=2, "y"=2], device_ids=[3, 2, 1, 0]>, [{"x"}, {?}]>',
    '#sdy.sharding<mesh<[]>, [{?}, {}]>',
    '#sdy.sharding<mesh<[], device_ids=[3]>, []>',
    # parses although the verifier would reject it
    '#sdy.sharding<@mesh, [{"x", "x"}, {}p1]>',
    '#sdy.sharding<@mesh, [{"x":(-1)2, "x":(1)0}]>',
]


@pytest.mark.parametrize("text", CANONICAL_SHARDINGS)
def test_sharding_round_trip_matches_jaxlib(text):
    sharding = parse_tensor_sharding(text)
    assert sharding.to_text() == text
    assert parse_tensor_sharding(sharding.to_inner_text()) == sharding
    assert jax_print(text) == text


CANONICAL_MESHES = [
    '<["x"=2, "y"=4]>',
    '<["x"=2], device_ids=[1, 0]>',
    '<[]>',
    '<[], device_ids=[3]>',
    '<[], device_ids=[0]>',
    '<["x"=1]>',
    '<["x"=2, "y"=1], device_ids=[1, 0]>',
    '<["a\\\\b"=2, "\\C3\\A9"=3, ""=1]>',
]


@pytest.mark.parametrize("text", CANONICAL_MESHES)
def test_mesh_round_trip_matches_jaxlib(text):
    mesh = read_mesh(text)
    assert mesh.to_text() == text
    assert parse_tensor_sharding(f"<mesh{text}, []>").mesh == mesh
    assert jax_print("#sdy.mesh" + text) == "#sdy.mesh" + text


@pytest.mark.parametrize("text", [
    '#sdy.sharding< @mesh , [ { "x" , ? } p1 ] , replicated = { "y" } >',
    '#sdy.sharding<@mesh, [{"x" : ( 2 ) 4}]>  // trailing comment',
    '#sdy.sharding<@mesh, [{"x"}], unreduced={"y"}, replicated={"z"}>',
    '#sdy.sharding<@"mesh", [{"x":(0x2)2, "y":(01)2}]>',
    '#sdy.sharding<mesh <["x"=2], device_ids=[0, 1]>, [{"x"}]>',
    '#sdy.sharding<@mesh, [{"x\\41\\n\\t"}]>',
])
def test_non_canonical_input_normalises_like_jaxlib(text):
    assert parse_tensor_sharding(text).to_text() == jax_print(text)


def test_iota_device_ids_are_dropped_like_the_attribute_builder():
    assert jax_print('#sdy.mesh<["x"=2], device_ids=[0, 1]>') == '#sdy.mesh<["x"=2]>'
    assert Mesh((MeshAxis("x", 2),), (0, 1)) == Mesh((MeshAxis("x", 2),))
    assert Mesh((MeshAxis("x", 1),), (0,)).device_ids == ()
    assert Mesh((MeshAxis("x", 2),), [1, 0]).device_ids == (1, 0)
    # a maximal mesh keeps its single id
    assert Mesh((), (0,)).is_maximal


def test_mesh_helpers():
    mesh = Mesh((MeshAxis("x", 2), MeshAxis("y", 4)))
    assert mesh.axis_size("y") == 4 and mesh.axis_index("y") == 1
    assert mesh.has_axis("x") and not mesh.has_axis("z")
    assert mesh.total_size == 8 and mesh.axis_names == ("x", "y")
    assert not mesh.is_empty and not mesh.is_maximal
    assert Mesh(()).is_empty and not Mesh(()).is_maximal
    maximal = Mesh((), (3,))
    assert maximal.is_maximal and not maximal.is_empty
    assert not Mesh((MeshAxis("x", 1),)).is_maximal
    with pytest.raises(SdyError, match='axis "z" is not in mesh'):
        mesh.axis_size("z")
    assert hash(mesh) == hash(read_mesh('<["x"=2,"y"=4]>'))


def test_small_pieces_parse_and_print():
    assert parse_axis_ref('"x"') == AxisRef("x")
    assert parse_axis_ref('"x":(2)4') == AxisRef("x", 2, 4)
    assert AxisRef("x", 2, 4).to_text() == '"x":(2)4'
    assert parse_tensor_sharding('<@m, [{"x", ?}p1]>').dims == (DimSharding((AxisRef("x"),), False, 1),)
    assert DimSharding().to_text() == "{?}"
    assert DimSharding(is_closed=True).to_text() == "{}"
    assert DimSharding((AxisRef("x"),), True, 2).to_text() == '{"x"}p2'
    assert DimSharding((AxisRef("x"),)).to_text() == '{"x", ?}'
    assert quote_string('a"b\\c\x01é') == '"a\\22b\\\\c\\01\\C3\\A9"'
    assert format_symbol_ref("mesh") == "@mesh"
    assert format_symbol_ref("a b") == '@"a b"'
    assert str(AxisRef("x")) == '"x"'


def test_tensor_sharding_helpers():
    s = TensorSharding.open_empty("mesh", 2)
    assert s.to_text() == "#sdy.sharding<@mesh, [{?}, {?}]>"
    assert s.is_fully_open_empty and not s.is_fully_closed
    assert s.mesh_name == "mesh" and s.rank == 2
    closed = parse_tensor_sharding('#sdy.sharding<@m, [{"x"}, {}], replicated={"y"}, unreduced={"z"}>')
    assert closed.is_fully_closed and not closed.is_fully_open_empty
    assert closed.axes_used() == (AxisRef("x"), AxisRef("y"), AxisRef("z"))
    inlined = TensorSharding(Mesh((MeshAxis("x", 2),)), [DimSharding()])
    assert inlined.mesh_name is None and inlined.dims == (DimSharding(),)
    assert not parse_tensor_sharding("<@m, [{?}p1]>").is_fully_open_empty
    assert hash(closed) == hash(parse_tensor_sharding(closed.to_text()))


BAD_SYNTAX = [
    ('#sdy.sharding<@mesh, [{"x"}p01]>', "column 28", "p01"),
    ('#sdy.sharding<@mesh, [{"x"}p]>', "column 28", "'p'"),
    ('#sdy.sharding<@mesh, [{"x"}q2]>', "column 28", "q2"),
    ('#sdy.sharding<@mesh, [{"x"}p2.5]>', "column 28", "p2.5"),
    ('#sdy.sharding<@mesh, [{"x"}p99999999999999999999]>', "column 28", "64 bits"),
    ('#sdy.sharding<@mesh, [{"x"}], replicated={}>', "column 43", "'}'"),
    ('#sdy.sharding<@mesh, [{"x"}], replicated={"y"}, replicated={"z"}>', "column 49", "twice"),
    ('#sdy.sharding<@mesh, [{"x"}], unreduced=max{"y"}>', "column 41", "reduction"),
    ('#sdy.sharding<@mesh, [{"x"}], unreduced{"y"}>', "column 40", "'='"),
    ('#sdy.sharding<@mesh, [{"x"}], >', "column 31", "'>'"),
    ('#sdy.sharding<@mesh, [{?, "x"}]>', "column 25", "','"),
    ('#sdy.sharding<@mesh, [{"x",}]>', "column 28", "'}'"),
    ('#sdy.sharding<@mesh, [{"x"},]>', "column 29", "']'"),
    ('#sdy.sharding<@mesh [{"x"}]>', "column 21", "'['"),
    ('#sdy.sharding<@mesh, [{"x":(2)}]>', "column 31", "'}'"),
    ('#sdy.sharding<@mesh, [{"x":2}]>', "column 28", "'2'"),
    ('#sdy.sharding<@mesh, [{"x":(1)2.5}]>', "column 31", "'2.5'"),
    ('#sdy.sharding<@mesh, [{"x":(1)9223372036854775808}]>', "column 31", "64 bits"),
    ('#sdy.sharding<@mesh, [{"x\\q"}]>', "column 26", "escape"),
    ('#sdy.sharding<@mesh, [{"x}]>', "column 24", "unterminated"),
    ('#sdy.sharding<@mesh, [{"x"}]', "column 29", "end of input"),
    ('#sdy.sharding<@mesh, [{"x"}]>>', "column 30", "'>'"),
    ('#sdy.sharding <@mesh, [{"x"}]>', "column 15", "'<'"),
    ('#sdy.sharding<#sdy.mesh<["x"=2]>, [{"x"}]>', "column 15", "#sdy.mesh"),
    ('#sdy.sharding<@a::@b, [{"x"}]>', "column 17", "':'"),
    ('#sdy.sharding<mesh<["x"=2, "x"=3]>, [{"x"}]>', "column 19", 'duplicate axis name "x"'),
    ('#sdy.sharding<mesh<["x"=2], device_ids=[]>, []>', "column 41", "']'"),
    ('#sdy.sharding<mesh<["x"]>, []>', "column 24", "'='"),
    ('#sdy.sharding<mesh<[x=2]>, []>', "column 21", "'x'"),
    ('#sdy.sharding<mesh<["x"=0]>, []>', "column 19", "at least 1"),
    ('#sdy.sharding<mesh<["x"=2], device_ids=[2, 0]>, []>', "column 19", "sorted device ids"),
    ('#sdy.sharding<mesh<["x"=2], device_ids=[0, 1, 2]>, []>', "column 19", "3 device ids"),
    ('#sdy.sharding<mesh<[], device_ids=[3, 4]>, []>', "column 19", "at most one device id"),
    ('#sdy.sharding<mesh<[], device_ids=[-1]>, []>', "column 19", "negative"),
]


@pytest.mark.parametrize("text,column,token", BAD_SYNTAX)
def test_parse_errors_name_column_and_token(text, column, token):
    with pytest.raises(SdyError) as info:
        parse_tensor_sharding(text)
    message = str(info.value)
    assert column in message and token in message, message
    assert "\n" not in message
    assert not jax_parses(text)


def test_empty_symbol_name_is_rejected():
    """Deliberate deviation: jaxlib parses ``@""`` and prints
    ``@<<INVALID EMPTY SYMBOL>>``; we reject it."""
    with pytest.raises(SdyError, match="column 15: expected a symbol name"):
        parse_tensor_sharding('#sdy.sharding<@"", [{"x"}]>')
    assert "INVALID EMPTY SYMBOL" in jax_print('#sdy.sharding<@"", [{"x"}]>')


# --------------------------------------------------------------------------
# Axis relations (§1.2 table)
# --------------------------------------------------------------------------

A8 = Mesh((MeshAxis("a", 8), MeshAxis("b", 8), MeshAxis("c", 6)))


def ref(text: str) -> AxisRef:
    return parse_axis_ref(text)


def test_relations_from_the_table():
    full, a_1_2, a_1_4, a_2_2, a_2_4, a_4_2 = map(
        ref, ['"a"', '"a":(1)2', '"a":(1)4', '"a":(2)2', '"a":(2)4', '"a":(4)2'])
    # contains
    assert full.contains(a_2_2, A8)
    assert a_1_4.contains(a_1_2, A8)
    assert not a_1_4.contains(a_2_4, A8)
    assert not a_1_4.contains(full, A8)
    assert not full.contains(ref('"b"'), A8)
    # prefix
    assert a_1_2.prefix_of(full, A8)
    assert a_2_2.prefix_of(a_2_4, A8)
    assert not a_2_4.prefix_of(full, A8)
    # overlaps
    assert a_1_4.overlaps(a_2_4, A8)
    assert not a_1_4.overlaps(a_4_2, A8)
    assert full.overlaps(a_4_2, A8)
    assert not full.overlaps(ref('"b"'), A8)
    # can_coexist
    assert not ref('"c":(1)2').can_coexist(ref('"c":(3)2'), A8)
    assert ref('"c":(1)2').can_coexist(ref('"c":(2)3'), A8)
    assert full.can_coexist(a_2_2, A8) and a_2_2.can_coexist(ref('"b":(1)3'), A8)
    # can_merge / merge
    assert a_1_2.can_merge(a_2_2)
    assert a_1_2.merge(a_2_2, A8) == a_1_4
    assert not a_1_2.can_merge(a_4_2)
    assert not a_2_2.can_merge(a_1_2)
    assert not full.can_merge(a_2_2)
    assert ref('"b":(1)2').merge(ref('"b":(2)4'), A8) == ref('"b"')
    with pytest.raises(ValueError):
        a_1_2.merge(a_4_2, A8)


def test_sizes_and_sub_axis_helpers():
    assert ref('"a"').full_size(A8) == 8 and ref('"a":(2)2').full_size(A8) == 8
    assert ref('"a"').ref_size(A8) == 8 and ref('"a":(2)2').ref_size(A8) == 2
    assert ref('"a"').next_pre(A8) == 8 and ref('"a":(2)2').next_pre(A8) == 4
    assert ref('"a":(2)2').is_sub_axis and not ref('"a"').is_sub_axis
    assert make_sub_axis("a", 1, 8, A8) == AxisRef("a")
    assert make_sub_axis("a", 2, 4, A8) == AxisRef("a", 2, 4)
    # the parsed value is kept as written
    assert ref('"a":(1)8') != ref('"a"')
    with pytest.raises(ValueError):
        AxisRef("a", 2)


def test_derived_refs():
    r = ref
    assert r('"a":(1)4').overlap(r('"a":(2)4'), A8) == r('"a":(2)2')
    assert r('"a"').overlap(r('"a":(2)2'), A8) == r('"a":(2)2')
    assert r('"a":(2)2').overlap(r('"a"'), A8) == r('"a":(2)2')
    assert r('"a":(1)2').overlap(r('"a":(4)2'), A8) is None
    assert r('"c":(1)2').overlap(r('"c":(1)3'), A8) is None  # cannot coexist
    assert r('"a"').overlap(r('"b"'), A8) is None

    assert r('"a":(1)4').prefix_without_overlap(r('"a":(2)4'), A8) == r('"a":(1)2')
    assert r('"a"').prefix_without_overlap(r('"a":(4)2'), A8) == r('"a":(1)4')
    assert r('"a":(2)4').prefix_without_overlap(r('"a":(1)4'), A8) is None
    assert r('"a":(1)2').prefix_without_overlap(r('"a":(4)2'), A8) == r('"a":(1)2')
    assert r('"c":(1)2').prefix_without_overlap(r('"c":(3)2'), A8) is None

    assert r('"a":(1)4').suffix_without_overlap(r('"a":(1)2'), A8) == r('"a":(2)2')
    assert r('"a"').suffix_without_overlap(r('"a":(1)2'), A8) == r('"a":(2)4')
    assert r('"a":(1)4').suffix_without_overlap(r('"a":(2)4'), A8) is None
    assert r('"a":(1)2').suffix_without_overlap(r('"b"'), A8) == r('"a":(1)2')

    assert r('"a":(1)2').greatest_common_prefix(r('"a"'), A8) == r('"a":(1)2')
    assert r('"a"').greatest_common_prefix(r('"a":(1)4'), A8) == r('"a":(1)4')
    assert r('"a":(2)2').greatest_common_prefix(r('"a":(1)4'), A8) is None
    assert r('"c":(1)2').greatest_common_prefix(r('"c":(1)3'), A8) is None


def test_ordering():
    mesh = Mesh((MeshAxis("z", 8), MeshAxis("a", 8)))
    refs = [ref('"z":(4)2'), ref('"a"'), ref('"z"'), ref('"z":(1)2'),
            ref('"a":(2)2'), ref('"z":(1)4'), ref('"a":(1)2'), ref('"z":(2)2')]
    plain = ['"a":(1)2', '"a"', '"a":(2)2', '"z":(1)2', '"z":(1)4', '"z"',
             '"z":(2)2', '"z":(4)2']
    assert [x.to_text() for x in sorted(refs)] == plain
    by_mesh = ['"z":(1)2', '"z":(1)4', '"z"', '"z":(2)2', '"z":(4)2',
               '"a":(1)2', '"a"', '"a":(2)2']
    assert [x.to_text() for x in sorted(refs, key=lambda x: x.sort_key_in(mesh))] == by_mesh
    assert ref('"a":(1)2') < ref('"a"') < ref('"a":(2)2')
    assert ref('"a"') <= ref('"a"') and ref('"b"') > ref('"a":(4)2')


@st.composite
def sub_axis_pairs(draw):
    """An axis size and two valid sub-axes of it."""
    size = draw(st.sampled_from([4, 6, 8, 12, 16, 24, 30, 36, 64]))
    divisors = [d for d in range(1, size + 1) if size % d == 0]

    def one():
        pre = draw(st.sampled_from(divisors[:-1]))
        rest = size // pre
        k = draw(st.sampled_from([d for d in divisors if rest % d == 0 and 1 < d < size]))
        return AxisRef("a", pre, k)
    return size, one(), one()


@settings(max_examples=300, deadline=None)
@given(sub_axis_pairs())
def test_can_coexist_means_one_divisibility_chain(pair):
    """Two sub-axes coexist iff their four boundaries, sorted, form a chain
    ``b0 | b1 | b2 | b3`` (one factorisation of the axis contains both)."""
    size, a, b = pair
    mesh = Mesh((MeshAxis("a", size),))
    bounds = sorted([a.pre, a.next_pre(), b.pre, b.next_pre()])
    chain = all(y % x == 0 for x, y in zip(bounds, bounds[1:]))
    assert a.can_coexist(b, mesh) == b.can_coexist(a, mesh) == chain
    assert a.overlaps(b, mesh) == (max(a.pre, b.pre) < min(a.next_pre(), b.next_pre()))
    if chain and a.overlaps(b, mesh):
        common = a.overlap(b, mesh)
        assert a.contains(common) and b.contains(common)
    if chain:
        for part in (a.prefix_without_overlap(b, mesh), a.suffix_without_overlap(b, mesh)):
            assert part is None or (a.contains(part) and not part.overlaps(b))


# --------------------------------------------------------------------------
# Random valid shardings
# --------------------------------------------------------------------------

AXIS_NAMES = ["x", "y", "z", "data", "model", "a.b", "with space", 'q"uote',
              "back\\slash", "é", "_"]
MESH_NAMES = ["mesh", "m_1", "mesh.a", "1mesh", "m x"]


def _chain_pieces(draw, size: int) -> list[tuple[int, int]]:
    """Split an axis of ``size`` into consecutive ``(pre, size)`` pieces."""
    pieces, pre = [], 1
    while pre < size:
        rest = size // pre
        k = draw(st.sampled_from([d for d in range(2, rest + 1) if rest % d == 0]))
        pieces.append((pre, k))
        pre *= k
    return pieces


@st.composite
def meshes(draw):
    kind = draw(st.sampled_from(["axes", "axes", "axes", "empty", "maximal"]))
    if kind == "empty":
        return Mesh()
    if kind == "maximal":
        return Mesh((), (draw(st.integers(0, 7)),))
    names = draw(st.lists(st.sampled_from(AXIS_NAMES), min_size=1, max_size=4, unique=True))
    axes = tuple(MeshAxis(n, draw(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16]))) for n in names)
    ids: tuple[int, ...] = ()
    total = math.prod(a.size for a in axes)
    if total <= 64 and draw(st.booleans()):
        ids = tuple(draw(st.permutations(range(total))))
    return Mesh(axes, ids)


@st.composite
def valid_shardings(draw):
    """``(sharding, mesh, rank)`` with a sharding the verifier accepts."""
    mesh = draw(meshes())
    mesh_ref = draw(st.one_of(st.sampled_from(MESH_NAMES), st.just(mesh)))
    if mesh.is_maximal:
        return TensorSharding(mesh_ref, ()), mesh, draw(st.integers(0, 3))
    rank = draw(st.integers(0, 4))
    dims: list[list[AxisRef]] = [[] for _ in range(rank)]
    replicated: list[AxisRef] = []
    unreduced: list[AxisRef] = []
    for axis in mesh.axes:
        pieces = ([(1, axis.size)] if axis.size == 1 or draw(st.booleans())
                  else _chain_pieces(draw, axis.size))
        for pre, k in pieces:
            where = draw(st.integers(-3, rank - 1))
            if where == -3:
                continue  # implicitly replicated
            r = make_sub_axis(axis.name, pre, k, mesh)
            (replicated if where == -2 else unreduced if where == -1 else dims[where]).append(r)
    dim_shardings = []
    for axes in dims:
        axes = merge_adjacent(draw(st.permutations(axes)), mesh)
        closed = draw(st.booleans())
        priority = None
        if axes or not closed:
            priority = draw(st.one_of(st.none(), st.integers(0, 12)))
        dim_shardings.append(DimSharding(tuple(axes), closed, priority))

    def canonical(refs):
        return tuple(merge_adjacent(sorted(refs, key=lambda r: r.sort_key_in(mesh)), mesh))
    sharding = TensorSharding(mesh_ref, tuple(dim_shardings), canonical(replicated),
                              canonical(unreduced))
    return sharding, mesh, rank


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_shardings())
def test_random_valid_shardings(case):
    sharding, mesh, rank = case
    text = sharding.to_text()
    assert parse_tensor_sharding(text) == sharding
    assert jax_print(text) == text
    assert jax_module_error(sharding, mesh, rank) is None


@settings(max_examples=200, deadline=None)
@given(meshes())
def test_random_meshes_round_trip(mesh):
    mesh.verify()
    assert read_mesh(mesh.to_text()) == mesh
    assert jax_print("#sdy.mesh" + mesh.to_text()) == "#sdy.mesh" + mesh.to_text()


# --------------------------------------------------------------------------
# Invalid shardings
# --------------------------------------------------------------------------


@pytest.mark.parametrize("mesh,message", [
    (Mesh((MeshAxis("x", 2), MeshAxis("x", 2))), 'duplicate axis name "x"'),
    (Mesh((MeshAxis("x", 0),)), 'axis "x" has size 0'),
    (Mesh((MeshAxis("x", 2),), (1, 1)), "sorted device ids"),
    (Mesh((MeshAxis("x", 2),), (1, 0, 2)), "3 device ids"),
    (Mesh((), (0, 1)), "at most one device id"),
    (Mesh((), (-2,)), "device id -2 is negative"),
])
def test_invalid_meshes_are_rejected(mesh, message):
    with pytest.raises(SdyError, match=message):
        mesh.verify()
    assert not jax_parses("#sdy.mesh" + mesh.to_text())
