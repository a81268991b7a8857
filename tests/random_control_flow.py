"""Random modules with control flow and calls for whole-pipeline differential tests.

``random_control_flow_module(seed)`` builds a main function over the mesh
``a=2, b=4`` whose 8x8 values flow through a ``stablehlo.while`` (some
carries returned unchanged, some updated), ``stablehlo.case``,
``stablehlo.optimization_barrier``, sharding constraints, dots, transposes,
elementwise ops and calls to private functions (called once or several
times, some with argument shardings); arguments, results and some op
results carry random shardings (a few arguments unreduced on ``a``).
"""

from __future__ import annotations

import random

T = "tensor<8x8xf32>"
AXES = ('"a"', '"b"')
KINDS = ("unary", "binary", "transpose", "dot", "constraint", "call", "call", "sharded",
         "case", "barrier")


def _sharding(rng: random.Random, closed: float = 0.5) -> str:
    dims, used = [], set()
    for _ in range(2):
        axes = [a for a in AXES if a not in used and rng.random() < 0.35]
        used.update(axes)
        is_open = rng.random() >= closed
        dims.append("{" + ", ".join(axes) + ((", ?" if axes else "?") if is_open else "") + "}")
    return f"<@mesh, [{dims[0]}, {dims[1]}]>"


class _Builder:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.count = 0
        self.funcs: list[str] = []
        self.func_texts: list[str] = []

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def op(self, lines: list[str], pool: list[str], indent: str, calls: bool = True) -> None:
        """Append one random op reading values of ``pool``; its result joins the pool."""
        rng = self.rng
        kind = rng.choice(KINDS)
        x, y, r = rng.choice(pool), rng.choice(pool), self.fresh()
        attr = (f" {{sdy.sharding = #sdy.sharding_per_value<[{_sharding(rng)}]>}}"
                if rng.random() < 0.15 else "")
        if kind in ("unary", "sharded"):
            lines.append(f"{indent}{r} = stablehlo.{rng.choice(['negate', 'sine', 'abs'])} {x}{attr} : {T}")
        elif kind == "binary":
            lines.append(f"{indent}{r} = stablehlo.{rng.choice(['add', 'multiply'])} {x}, {y}{attr} : {T}")
        elif kind == "transpose":
            lines.append(f"{indent}{r} = stablehlo.transpose {x}, dims = [1, 0]{attr} : ({T}) -> {T}")
        elif kind == "dot":
            lines.append(f"{indent}{r} = stablehlo.dot_general {x}, {y}, contracting_dims = [1] x [0]"
                         f"{attr} : ({T}, {T}) -> {T}")
        elif kind == "constraint":
            lines.append(f"{indent}{r} = sdy.sharding_constraint {x} {_sharding(rng)} : {T}")
        elif kind == "case":
            index, other = self.fresh(), self.fresh()
            lines += [f"{indent}{index} = stablehlo.constant dense<1> : tensor<i32>",
                      f'{indent}{r} = "stablehlo.case"({index}) ({{',
                      f"{indent}  stablehlo.return {x} : {T}",
                      f"{indent}}}, {{",
                      f"{indent}  {other} = stablehlo.negate {y} : {T}",
                      f"{indent}  stablehlo.return {other} : {T}",
                      f"{indent}}}){attr} : (tensor<i32>) -> {T}"]
        elif kind == "barrier":
            lines.append(f"{indent}{r} = stablehlo.optimization_barrier {x} : {T}")
        elif calls:
            lines.append(f"{indent}{r} = func.call @{self.func()}({x}){attr} : ({T}) -> {T}")
        else:
            lines.append(f"{indent}{r} = stablehlo.negate {x} : {T}")
        pool.append(r)

    def func(self) -> str:
        """A private function to call: an existing one half the time."""
        rng = self.rng
        if self.funcs and rng.random() < 0.5:
            return rng.choice(self.funcs)
        name = f"f{len(self.funcs)}"
        self.funcs.append(name)
        arg = (' {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}'
               if rng.random() < 0.2 else "")
        lines: list[str] = []
        pool = ["%arg0"]
        for _ in range(rng.randint(1, 3)):
            self.op(lines, pool, "  ", calls=False)
        body = "\n".join(lines)
        self.func_texts.append(f"func.func private @{name}(%arg0: {T}{arg}) -> {T} {{\n{body}\n"
                               f"  return {pool[-1]} : {T}\n}}")
        return name

    def build(self) -> str:
        rng = self.rng
        args = []
        for i in range(rng.randint(1, 3)):
            arg = f"%arg{i}: {T}"
            if rng.random() < 0.6:
                sharding = _sharding(rng, 0.8)
                if rng.random() < 0.2 and '"a"' not in sharding:
                    sharding = sharding[:-1] + ', unreduced={"a"}>'
                arg += f" {{sdy.sharding = #sdy.sharding{sharding}}}"
            args.append(arg)
        pool = [f"%arg{i}" for i in range(len(args))]
        lines: list[str] = []
        for _ in range(rng.randint(0, 2)):
            self.op(lines, pool, "  ")
        carries = rng.randint(1, 3)
        inits = [rng.choice(pool) for _ in range(carries)]
        loop = self.fresh()
        iters = ", ".join(["%i = %c0"] + [f"%it{j} = {v}" for j, v in enumerate(inits)])
        types = ", ".join(["tensor<i32>"] + [T] * carries)
        lines += ["  %c0 = stablehlo.constant dense<0> : tensor<i32>",
                  f"  {loop}:{carries + 1} = stablehlo.while({iters}) : {types}",
                  "    cond {",
                  "      %cl = stablehlo.constant dense<3> : tensor<i32>",
                  "      %p = stablehlo.compare LT, %i, %cl, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>",
                  "      stablehlo.return %p : tensor<i1>",
                  "    } do {"]
        body = [f"%it{j}" for j in range(carries)] + ([rng.choice(pool)] if rng.random() < 0.3 else [])
        for _ in range(rng.randint(1, 4)):
            self.op(lines, body, "      ")
        returned = [f"%it{j}" if rng.random() < 0.4 else rng.choice(body[carries:] or body)
                    for j in range(carries)]
        lines += ["      %one = stablehlo.constant dense<1> : tensor<i32>",
                  "      %inc = stablehlo.add %i, %one : tensor<i32>",
                  f"      stablehlo.return %inc, {', '.join(returned)} : {types}",
                  "    }"]
        pool += [f"{loop}#{j + 1}" for j in range(carries)]
        for _ in range(rng.randint(0, 2)):
            self.op(lines, pool, "  ")
        results = [pool[-1 - k] for k in range(rng.randint(1, 2))]
        result_types = [T + (f" {{sdy.sharding = #sdy.sharding{_sharding(rng, 0.8)}}}"
                             if rng.random() < 0.3 else "") for _ in results]
        main = (f"func.func @main({', '.join(args)}) -> ({', '.join(result_types)}) {{\n"
                + "\n".join(lines)
                + f"\n  return {', '.join(results)} : {', '.join([T] * len(results))}\n}}")
        return '\n'.join(['sdy.mesh @mesh = <["a"=2, "b"=4]>', main, *self.func_texts]) + "\n"


def random_control_flow_module(seed: int) -> str:
    """The random module of ``seed`` (see the module docstring)."""
    return _Builder(seed).build()
