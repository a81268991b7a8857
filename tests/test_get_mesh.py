"""Stage ``get_mesh`` (Shardy's ``getMesh`` in insert-explicit-reshards) on both
embedded engines; the pass is compared with Shardy's in
test_insert_explicit_reshards*.py."""

from __future__ import annotations

import pytest

from oracle import read_mesh
from sdy_dl.passes import PassOptions, RunContext
from sdy_dl.passes.export.get_mesh import get_meshes
from sdy_dl.sharding import parse_tensor_sharding

MESHES = {"m1": read_mesh('<["a"=2, "b"=2]>'),
          "m2": read_mesh('<["a"=2, "b"=2], device_ids=[3, 2, 1, 0]>'),
          "n": read_mesh('<["a"=4]>'),
          "e": read_mesh('<[]>'),
          "x": read_mesh('<[], device_ids=[1]>')}


def s(mesh: str, sharded: bool = True):
    return parse_tensor_sharding(f'#sdy.sharding<@{mesh}, [{{"a"}}, {{}}]>' if sharded
                                 else f'#sdy.sharding<@{mesh}, [{{}}, {{}}]>')


CASES = [
    ([s("m1"), s("m2"), s("m2")], "m2"),                    # the most used
    ([s("m2"), s("m1")], "m2"),                             # a tie: the first to reach it
    ([s("m2", False), s("m1", False)], "m1"),               # replicated: the common mesh
    ([s("m1", False), s("m2", False)], "m1"),
    ([s("m1"), s("n")], None),                              # other axes
    ([s("e", False), None], None),                          # only an empty mesh
    ([None, None], None),
    ([parse_tensor_sharding("#sdy.sharding<@x, []>")], None),   # maximal
    ([s("e", False), s("m2")], "m2"),
    ([None, s("m2", False), s("m1")], "m1"),
]


@pytest.mark.parametrize("engine", ["python", "clingo"])
def test_get_mesh_as_shardy(engine):
    cases = CASES + CASES[::-1]     # ops read alike share one answer, given back to each
    got = get_meshes([tensors for tensors, _ in cases], MESHES, PassOptions(RunContext(engine=engine)))
    assert got == [want for _, want in cases]
