"""The one rule builder: Shardy's conventions for numbering and mapping factors.

Every template, generator and einsum ends up here, so the conventions that
shape the exact factor numbering live in one place (semantics §2.4):

* factors are numbered in the order they are added;
* :meth:`RuleBuilder.add_on_all` maps a factor to dim ``d`` of every tensor
  that has a dim ``d`` (rank-0 and non-tensor values, and tensors of lower rank
  as in Shardy's pointwise rule, are skipped) and always appends;
* :meth:`RuleBuilder.add` maps a factor to explicit per-tensor dims (``None``:
  the tensor does not get it); a factor of size 1 is *not* appended to a dim
  that already has a factor;
* :meth:`RuleBuilder.build` gives every still-unmapped dim a fresh size-1
  factor, numbered operand 0 dim 0, operand 0 dim 1, ..., then the results.
"""

from __future__ import annotations

from typing import Sequence

from sdy_dl.errors import SdyError
from sdy_dl.rules.instance import FACTOR_KINDS, Factor, RuleInstance


class RuleBuilder:
    """Accumulates factors for one op; ``build`` finalises the rule."""

    def __init__(self, operand_ranks: Sequence[int], result_ranks: Sequence[int]):
        self.factors: list[Factor] = []
        self.operands: list[list[list[int]]] = [[[] for _ in range(r)] for r in operand_ranks]
        self.results: list[list[list[int]]] = [[[] for _ in range(r)] for r in result_ranks]

    @property
    def operand_ranks(self) -> list[int]:
        return [len(t) for t in self.operands]

    @property
    def result_ranks(self) -> list[int]:
        return [len(t) for t in self.results]

    def _new(self, size: int, kind: str, blocked: bool) -> int:
        if kind not in FACTOR_KINDS:
            raise SdyError(f"bad factor kind {kind!r} (expected one of {', '.join(FACTOR_KINDS)})")
        problem = factor_size_problem(size)
        if problem:
            raise SdyError(problem)
        self.factors.append(Factor(size, kind, bool(blocked)))
        return len(self.factors) - 1

    def add_on_all(self, operand_dim: int | None, result_dim: int | None, size: int,
                   kind: str = "pass_through", blocked: bool = False) -> int:
        """A factor on one dim of every operand and result that has that dim
        (Shardy's "same for all"); ``None`` leaves that side out."""
        index = self._new(size, kind, blocked)
        for label, side, dim in (("operand", self.operands, operand_dim),
                                 ("result", self.results, result_dim)):
            if dim is None:
                continue
            if not isinstance(dim, int) or isinstance(dim, bool) or dim < 0:
                raise SdyError(f"dim {dim!r} for every {label} must be an integer >= 0")
            for tensor in side:
                if dim < len(tensor):
                    tensor[dim].append(index)
        return index

    def add(self, operand_dims: Sequence[int | None], result_dims: Sequence[int | None],
            size: int, kind: str = "pass_through", blocked: bool = False) -> int:
        """A factor on explicit dims: one entry per operand and per result (None: none)."""
        if len(operand_dims) != len(self.operands) or len(result_dims) != len(self.results):
            raise SdyError(f"factor dims for {len(operand_dims)} operand(s) and "
                           f"{len(result_dims)} result(s), but the op has "
                           f"{len(self.operands)} and {len(self.results)}")
        index = self._new(size, kind, blocked)
        for label, side, dims in (("operand", self.operands, operand_dims),
                                  ("result", self.results, result_dims)):
            for t, (tensor, dim) in enumerate(zip(side, dims)):
                if dim is None:
                    continue
                _check_dim(dim, len(tensor), label, t)
                if size == 1 and tensor[dim]:
                    continue
                tensor[dim].append(index)
        return index

    def build(self, is_custom: bool = False) -> RuleInstance:
        """The finished rule: unmapped dims get fresh size-1 factors."""
        factors = list(self.factors)

        def finish(side):
            out = []
            for tensor in side:
                dims = []
                for dim in tensor:
                    if not dim:
                        factors.append(Factor(1))
                        dim = [len(factors) - 1]
                    dims.append(tuple(dim))
                out.append(tuple(dims))
            return tuple(out)

        operands = finish(self.operands)
        results = finish(self.results)
        return RuleInstance(tuple(factors), operands, results, is_custom)


#: The size MLIR gives a dynamic dim (``ShapedType::kDynamic``): a rule built on it
#: has it as a factor size, as Shardy's, whose verifier then refuses the op.
DYNAMIC_SIZE = -2 ** 63


def factor_size_problem(size) -> str | None:
    """What is wrong with the factor size ``size`` (None: nothing): a size is an
    integer of 64 bits, as a tensor dim's size is, so >= 0 or a dynamic dim's."""
    if not isinstance(size, int) or isinstance(size, bool):
        return f"factor size must be an integer, got {size!r}"
    if not -2 ** 63 <= size < 2 ** 63:
        return f"factor size {size} does not fit in 64 bits"
    if size < 0 and size != DYNAMIC_SIZE:
        return f"factor size {size} is negative"
    return None


def empty_factor_problem(builder: RuleBuilder, index: int, operand_shapes, result_shapes
                         ) -> str | None:
    """What is wrong with factor ``index`` of ``builder``, of size 0, on tensors of
    these shapes (None: nothing): a factor of size 0 maps only dims of size 0 (an
    empty tensor's)."""
    for label, shapes, side in (("operand", operand_shapes, builder.operands),
                                ("result", result_shapes, builder.results)):
        for t, (shape, dims) in enumerate(zip(shapes, side)):
            for d, factors in enumerate(dims):
                if index in factors and shape[d] != 0:
                    return (f"factor size 0 on {label} {t} dim {d} of size {shape[d]} (a factor "
                            "of size 0 maps only dims of size 0)")
    return None


def _check_dim(dim, rank: int, label: str, t: int) -> None:
    if not isinstance(dim, int) or isinstance(dim, bool) or not 0 <= dim < rank:
        raise SdyError(f"dim {dim!r} is out of range for {label} {t} of rank {rank}")
