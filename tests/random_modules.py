"""Random modules for differential propagation tests.

``random_module(seed)`` builds a function over a random mesh: a DAG of
elementwise, dot_general, reshape, transpose, broadcast_in_dim and reduce
ops, with random valid shardings (open or closed dims, sub-axes never) on
some arguments and op results.  Every value is returned so no op is dead.
"""

from __future__ import annotations

import itertools
import random

DIMS = (2, 4, 6, 8, 12, 16)


def _mesh(rng: random.Random) -> list[tuple[str, int]]:
    names = rng.sample(["a", "b", "c"], rng.randint(1, 3))
    return [(n, rng.choice((2, 2, 3, 4))) for n in sorted(names)]


def _ttype(shape) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>" if shape else "tensor<f32>"


def _sharding(rng: random.Random, mesh, shape) -> str:
    axes = [n for n, _ in mesh]
    rng.shuffle(axes)
    dims = [[] for _ in shape]
    for axis in axes:
        if shape and rng.random() < 0.5:
            dims[rng.randrange(len(shape))].append(axis)
    parts = []
    for dim in dims:
        inner = ", ".join(f'"{a}"' for a in dim)
        closed = rng.random() < 0.3
        parts.append("{" + inner + ("" if closed else (", ?" if inner else "?")) + "}")
    return f'<@mesh, [{", ".join(parts)}]>'


def _factorizations(total: int):
    """Shapes (rank 1-3) with the given number of elements, dims > 1."""
    divisors = [d for d in range(2, total + 1) if total % d == 0]
    out = [(total,)]
    for a in divisors:
        if total // a > 1:
            out.append((a, total // a))
            for b in divisors:
                if (total // a) % b == 0 and total // a // b > 1:
                    out.append((a, b, total // a // b))
    return out


def random_module(seed: int, ops: int = 8, conflicts: tuple[str, ...] = ()) -> str:
    """A random module; ``conflicts`` adds the cases insert-explicit-reshards
    reshards: "dot" (dots whose result a sharding constraint wants sharded like
    the contracting dim, or otherwise) and "concat" (concatenates of two values
    of the same shape, often sharded differently)."""
    rng = random.Random(seed)
    mesh = _mesh(rng)
    values: list[tuple[str, tuple[int, ...]]] = []
    args = []
    for i in range(rng.randint(1, 3)):
        shape = tuple(rng.choice(DIMS) for _ in range(rng.randint(1, 3)))
        attr = (f" {{sdy.sharding = #sdy.sharding{_sharding(rng, mesh, shape)}}}"
                if rng.random() < 0.7 else "")
        args.append(f"%arg{i}: {_ttype(shape)}{attr}")
        values.append((f"%arg{i}", shape))
    lines = []
    counter = itertools.count()

    def emit(expr: str, shape) -> None:
        name = f"%v{next(counter)}"
        attr = ""
        if rng.random() < 0.25:
            attr = f" {{sdy.sharding = #sdy.sharding_per_value<[{_sharding(rng, mesh, shape)}]>}}"
        lines.append(f"  {name} = {expr.replace('@ATTR', attr)}")
        values.append((name, shape))

    for _ in range(ops):
        name, shape = rng.choice(values)
        kinds = ["unary", "binary", "binary", "transpose", "reshape", "broadcast", "reduce", "dot"]
        kind = rng.choice(kinds + (["constrained_dot"] * 3 if "dot" in conflicts else [])
                          + (["concat"] * 2 if "concat" in conflicts else []))
        t = _ttype(shape)
        if kind == "unary":
            op = rng.choice(["abs", "negate", "sine", "exponential"])
            emit(f"stablehlo.{op} {name}@ATTR : {t}", shape)
        elif kind == "binary":
            same = [v for v, s in values if s == shape]
            other = rng.choice(same)
            op = rng.choice(["add", "multiply", "subtract", "maximum"])
            emit(f"stablehlo.{op} {name}, {other}@ATTR : {t}", shape)
        elif kind == "transpose" and len(shape) > 1:
            perm = list(range(len(shape)))
            rng.shuffle(perm)
            out = tuple(shape[p] for p in perm)
            emit(f"stablehlo.transpose {name}, dims = {perm}@ATTR : ({t}) -> {_ttype(out)}", out)
        elif kind == "reshape":
            total = 1
            for d in shape:
                total *= d
            out = rng.choice(_factorizations(total))
            emit(f"stablehlo.reshape {name}@ATTR : ({t}) -> {_ttype(out)}", out)
        elif kind == "broadcast" and len(shape) < 3:
            pos = rng.randrange(len(shape) + 1)
            out = shape[:pos] + (rng.choice(DIMS),) + shape[pos:]
            dims = [d if d < pos else d + 1 for d in range(len(shape))]
            emit(f"stablehlo.broadcast_in_dim {name}, dims = {dims}@ATTR : ({t}) -> {_ttype(out)}", out)
        elif kind == "reduce" and len(shape) > 1:
            dim = rng.randrange(len(shape))
            out = shape[:dim] + shape[dim + 1:]
            init = f"%c{next(counter)}"
            lines.append(f"  {init} = stablehlo.constant dense<0.0> : tensor<f32>")
            emit(f"stablehlo.reduce({name} init: {init}) applies stablehlo.add across dimensions = "
                 f"[{dim}]@ATTR : ({t}, tensor<f32>) -> {_ttype(out)}", out)
        elif kind == "dot" and len(shape) == 2:
            n = rng.choice(DIMS)
            rhs = [v for v, s in values if len(s) == 2 and s[0] == shape[1]]
            if rhs and rng.random() < 0.6:
                other = rng.choice(rhs)
                n = dict(values)[other][1]
            else:
                other = f"%w{next(counter)}"
                args.append(f"{other}: {_ttype((shape[1], n))}")
                values.append((other, (shape[1], n)))
            out = (shape[0], n)
            emit(f"stablehlo.dot_general {name}, {other}, contracting_dims = [1] x [0]@ATTR : "
                 f"({t}, {_ttype((shape[1], n))}) -> {_ttype(out)}", out)
        elif kind == "constrained_dot" and len(shape) == 2:
            # lhs contracting dim on axis a, rhs alike (or not), the result
            # constrained to a on one of its dims (or randomly).
            a = rng.choice(mesh)[0]
            rest = [n for n, _ in mesh if n != a]
            n = rng.choice(DIMS)
            lhs = f"%l{next(counter)}"
            lines.append(f"  {lhs} = sdy.sharding_constraint {name} <@mesh, [{{?}}, {{\"{a}\"}}]> : {t}")
            other = f"%w{next(counter)}"
            rhs_dim1 = f'"{rng.choice(rest)}"' if rest and rng.random() < 0.9 else ""
            rhs_dim0 = f'"{a}"' if rng.random() < 0.8 else ""
            args.append(f"{other}: {_ttype((shape[1], n))} "
                        f"{{sdy.sharding = #sdy.sharding<@mesh, [{{{rhs_dim0}}}, {{{rhs_dim1}}}]>}}")
            out = (shape[0], n)
            dot_value = f"%d{next(counter)}"
            lines.append(f"  {dot_value} = stablehlo.dot_general {lhs}, {other}, "
                         f"contracting_dims = [1] x [0] : ({t}, {_ttype((shape[1], n))}) -> "
                         f"{_ttype(out)}")
            target = rng.choice([f'[{{}}, {{"{a}"}}]', f'[{{}}, {{"{a}"}}]', f'[{{"{a}"}}, {{}}]',
                                 _sharding(rng, mesh, out)[len("<@mesh, "):-1]])
            emit(f"sdy.sharding_constraint {dot_value} <@mesh, {target}> : {_ttype(out)}", out)
        elif kind == "concat":
            dim = rng.randrange(len(shape))
            same = [v for v, s in values if s == shape]
            parts = [name, rng.choice(same)]
            out = shape[:dim] + (2 * shape[dim],) + shape[dim + 1:]
            emit(f"stablehlo.concatenate {', '.join(parts)}, dim = {dim}@ATTR : "
                 f"({t}, {t}) -> {_ttype(out)}", out)
    mesh_text = ", ".join(f'"{n}"={s}' for n, s in mesh)
    results = [(v, s) for v, s in values if v.startswith("%v")] or values[:1]
    ret = ", ".join(v for v, _ in results)
    types = ", ".join(_ttype(s) for _, s in results)
    return (f"sdy.mesh @mesh = <[{mesh_text}]>\n"
            f"func.func @main({', '.join(args)}) -> ({types}) {{\n" + "\n".join(lines) +
            f"\n  return {ret} : {types}\n}}\n")
