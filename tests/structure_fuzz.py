"""A fuzzer that generates structure, not bytes, and runs it through the CLI.

Each case is built from the pieces of the sdy dialect and of sdy-dl's own
inputs -- meshes (sub-axes, device ids, empty and maximal meshes), shardings
(open and closed dims, priorities, replicated and unreduced axes), sharding
constraints, sharding groups, manual computations, rule files, pass options,
standard streams and replay directories -- valid most of the time, sometimes
broken in one place.  Every case runs as its own ``sdy-dl`` process (forked
by ``tests/fuzz_worker.py``, with real standard streams) and is judged:

* ``traceback``: a traceback or an "internal error" on standard error, or an
  error that is not exactly one ``sdy-dl: error:`` line;
* ``abort``: the process died of a signal;
* ``hang``: it ran past the timeout;
* ``partial``: it failed but left an output file (or a temporary file);
* ``unequal``: it succeeded where Shardy (jaxlib's passes, the oracle) gives
  another module or rejects the input, or failed where Shardy succeeds
  (except for the limits sdy-dl documents), or a replay of changed
  relations succeeded with another module than the run they came from.

:func:`run_cases` returns the counts (all must be 0) and the cases behind
them.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ("traceback", "abort", "hang", "partial", "unequal")
AXIS_NAMES = ("a", "b", "c", "x")
SIZES = (1, 2, 3, 4, 8)
#: Errors sdy-dl raises by design where Shardy goes on (documented limits).
DOCUMENTED_REFUSALS = ("beyond the 32-bit numbers", "at most 2147483647",
                       "not valid UTF-8", "holds a NUL character")


# -- modules ---------------------------------------------------------------------------------------

@dataclass
class Mesh:
    name: str
    axes: list[tuple[str, int]]
    device_ids: list[int] | None = None

    def text(self) -> str:
        axes = ", ".join(f'"{n}"={s}' for n, s in self.axes)
        ids = "" if self.device_ids is None else \
            f", device_ids=[{', '.join(map(str, self.device_ids))}]"
        return f"sdy.mesh @{self.name} = <[{axes}]{ids}>"

    def size(self, axis: str) -> int:
        return dict(self.axes)[axis]


@dataclass
class ModuleGen:
    """Builds one random module; ``broken`` makes one piece invalid on purpose."""

    rng: random.Random
    broken: bool = False
    lines: list[str] = field(default_factory=list)
    values: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    counter: int = 0
    funcs: list[str] = field(default_factory=list)

    def fresh(self) -> str:
        self.counter += 1
        return f"%v{self.counter}"

    def pick_mesh(self) -> Mesh:
        rng = self.rng
        n = rng.choice((1, 2, 2, 3))
        names = rng.sample(AXIS_NAMES, n)
        axes = [(name, rng.choice(SIZES)) for name in names]
        total = 1
        for _, s in axes:
            total *= s
        ids = None
        roll = rng.random()
        if roll < 0.15:
            ids = list(range(total))
            rng.shuffle(ids)
            if self.broken and rng.random() < 0.5:
                ids = rng.choice((ids[:-1], ids + [0], [0] * total, sorted(ids), ids[::-1]))
        elif roll < 0.2:
            axes, ids = [], [rng.randrange(4)]          # a maximal mesh
        elif roll < 0.23:
            axes = []                                   # an empty mesh
        return Mesh("mesh", axes, ids)

    def axis_ref(self, mesh: Mesh) -> str:
        rng = self.rng
        name, size = rng.choice(mesh.axes)
        if self.broken and rng.random() < 0.1:
            return rng.choice(('"zz"', f'"{name}":(3)2', f'"{name}":(1){size}', f'"{name}":(1)1',
                               f'"{name}":(2){size * 2}', f'"{name}":(0)2'))
        if size >= 4 and rng.random() < 0.3:
            sub = rng.choice([d for d in (2, 4) if size % d == 0 and d < size])
            pre = rng.choice([p for p in (1, 2, 4) if size % (p * sub) == 0])
            return f'"{name}":({pre}){sub}'
        return f'"{name}"'

    def sharding(self, mesh: Mesh, shape: tuple[int, ...], inline: bool = False) -> str:
        """``<@mesh, [dims], replicated=..., unreduced=...>`` for a tensor of ``shape``."""
        rng = self.rng
        used: set[str] = set()
        dims = []
        for d in shape:
            axes = []
            if mesh.axes and rng.random() < 0.5:
                ref = self.axis_ref(mesh)
                base = ref.split(":")[0]
                if base not in used or (self.broken and rng.random() < 0.3):
                    used.add(base)
                    axes.append(ref)
            open_ = rng.random() < 0.3
            body = ", ".join(axes + (["?"] if open_ else []))
            prio = f"p{rng.randrange(4)}" if rng.random() < 0.2 and axes else ""
            dims.append(f"{{{body}}}{prio}")
        if self.broken and rng.random() < 0.2:
            dims.append("{}")                           # rank mismatch
        extra = ""
        free = [n for n, _ in mesh.axes if f'"{n}"' not in used]
        if free and rng.random() < 0.15:
            extra += f', replicated={{"{rng.choice(free)}"}}'
        elif free and rng.random() < 0.1:
            extra += f', unreduced={{"{rng.choice(free)}"}}'
        ref = "@mesh" if not (self.broken and rng.random() < 0.1) else "@nomesh"
        return f"<{ref}, [{', '.join(dims)}]{extra}>"

    @staticmethod
    def ttype(shape: tuple[int, ...]) -> str:
        return f"tensor<{''.join(f'{d}x' for d in shape)}f32>"

    def op(self, mesh: Mesh) -> None:
        rng = self.rng
        name, shape = rng.choice(self.values)
        t = self.ttype(shape)
        out = self.fresh()
        annotate = rng.random() < 0.25

        def attr(result_shape):
            if not annotate:
                return ""
            return (f" {{sdy.sharding = #sdy.sharding_per_value<"
                    f"[{self.sharding(mesh, result_shape)}]>}}")
        kind = rng.random()
        if kind < 0.3:
            op = rng.choice(("negate", "abs", "exponential", "tanh"))
            rule = self.rule_attr(shape) if rng.random() < 0.15 else ""
            if rule and annotate:
                rule = ""
            self.lines.append(f"  {out} = stablehlo.{op} {name}{attr(shape)}{rule} : {t}")
            self.values.append((out, shape))
        elif kind < 0.5:
            same = [v for v, s in self.values if s == shape]
            other = rng.choice(same)
            op = rng.choice(("add", "multiply", "maximum"))
            self.lines.append(f"  {out} = stablehlo.{op} {name}, {other}{attr(shape)} : {t}")
            self.values.append((out, shape))
        elif kind < 0.58 and len(shape) == 2:
            new = (shape[1], shape[0])
            self.lines.append(f"  {out} = stablehlo.transpose {name}, dims = [1, 0]{attr(new)} : "
                              f"({t}) -> {self.ttype(new)}")
            self.values.append((out, new))
        elif kind < 0.64 and len(shape) == 2:
            k = shape[1]
            n = rng.choice((4, 8))
            rhs = [v for v, s in self.values if s == (k, n)]
            if rhs:
                new = (shape[0], n)
                self.lines.append(
                    f"  {out} = stablehlo.dot_general {name}, {rng.choice(rhs)}, contracting_dims "
                    f"= [1] x [0]{attr(new)} : ({t}, {self.ttype((k, n))}) -> {self.ttype(new)}")
                self.values.append((out, new))
        elif kind < 0.7 and len(shape) <= 2:
            new = shape + (4,)
            dims = ", ".join(str(i) for i in range(len(shape)))
            self.lines.append(f"  {out} = stablehlo.broadcast_in_dim {name}, dims = [{dims}]"
                              f"{attr(new)} : ({t}) -> {self.ttype(new)}")
            self.values.append((out, new))
        elif kind < 0.75 and len(shape) == 2:
            new = (shape[0] * shape[1],)
            self.lines.append(f"  {out} = stablehlo.reshape {name}{attr(new)} : ({t}) -> "
                              f"{self.ttype(new)}")
            self.values.append((out, new))
        elif kind < 0.82:
            self.lines.append(f"  {out} = sdy.sharding_constraint {name} "
                              f"{self.sharding(mesh, shape)} : {t}")
            self.values.append((out, shape))
        elif kind < 0.9:
            group = rng.randrange(3)
            target = name
            if self.broken and rng.random() < 0.3:
                target = rng.choice(self.values)[0]
                t = self.ttype(dict(self.values)[target])
            self.lines.append(f"  sdy.sharding_group {target} group_id={group} : {t}")
        elif kind < 0.95 and mesh.axes:
            self.manual(mesh, name, shape, out)
        elif kind < 0.96:
            self.lines.append(f"  {out} = sdy.reshard {name} {self.sharding(mesh, shape)} : {t}")
            self.values.append((out, shape))
        elif kind < 0.97:
            direction = rng.choice(("FORWARD", "BACKWARD", "NONE", "BOTH"))
            self.lines.append(f"  {out} = sdy.propagation_barrier {name} "
                              f"allowed_direction={direction} : {t}")
            self.values.append((out, shape))
        elif kind < 0.98:
            self.lines += [
                f"  {out}:2 = stablehlo.while(%it{self.counter} = {name}, "
                f"%c{self.counter} = {name}) : {t}, {t}",
                "   cond {",
                f"    %k{self.counter} = stablehlo.constant dense<true> : tensor<i1>",
                f"    stablehlo.return %k{self.counter} : tensor<i1>",
                "  } do {",
                f"    %b{self.counter} = stablehlo.negate %it{self.counter} : {t}",
                f"    stablehlo.return %b{self.counter}, %c{self.counter} : {t}, {t}",
                "  }"]
            self.values.append((f"{out}#0", shape))
        elif kind < 0.99:
            callee = f"@f{self.counter}"
            self.lines.append(f"  {out} = call {callee}({name}) : ({t}) -> {t}")
            self.funcs.append(f"func.func private {callee}(%x: {t}) -> {t} {{\n"
                              f"  %y = stablehlo.abs %x : {t}\n  return %y : {t}\n}}")
            self.values.append((out, shape))
        else:
            self.lines.append(f"  {out} = stablehlo.constant dense<1.0> : {t}")
            self.values.append((out, shape))

    def rule_attr(self, shape: tuple[int, ...]) -> str:
        """An ``sdy.sharding_rule`` for a unary elementwise op on ``shape`` (the
        factors' sizes or special kinds sometimes wrong when broken)."""
        rng = self.rng
        names = "ijkl"[:len(shape)]
        mapping = f"([{', '.join(names)}])->([{', '.join(names)}])"
        sizes = [d if not (self.broken and rng.random() < 0.3) else d + 1 for d in shape]
        body = ", ".join(f"{n}={z}" for n, z in zip(names, sizes))
        extra = ""
        if names and rng.random() < 0.3:
            kind = rng.choice(("reduction", "need_replication", "permutation",
                               "blocked_propagation"))
            extra = f" {kind}={{{rng.choice(names)}}}"
        custom = ", custom" if rng.random() < 0.2 else ""
        rule = f"#sdy.op_sharding_rule<{mapping} {{{body}}}{extra}{custom}>"
        return f" {{sdy.sharding_rule = {rule}}}"

    def manual(self, mesh: Mesh, name: str, shape: tuple[int, ...], out: str) -> None:
        """An ``sdy.manual_computation`` over one axis on dim 0 (when it divides)."""
        rng = self.rng
        axis, size = rng.choice(mesh.axes)
        if not shape or shape[0] % size:
            return
        local = (shape[0] // size,) + shape[1:]
        rest = ", ".join(["{}"] * (len(shape) - 1))
        dims = f'{{"{axis}"}}' + (f", {rest}" if rest else "")
        t, lt = self.ttype(shape), self.ttype(local)
        arg = f"%m{self.counter}"
        self.lines += [
            f"  {out} = sdy.manual_computation({name}) in_shardings=[<@mesh, [{dims}]>] "
            f'out_shardings=[<@mesh, [{dims}]>] manual_axes={{"{axis}"}} ({arg}: {lt}) {{',
            f"    %n{self.counter} = stablehlo.negate {arg} : {lt}",
            f"    sdy.return %n{self.counter} : {lt}",
            f"  }} : ({t}) -> {t}"]
        self.values.append((out, shape))

    def module(self) -> str:
        rng = self.rng
        mesh = self.pick_mesh()
        shapes = [rng.choice(((8, 8), (8, 4), (4, 8), (8,), (16,), ()))
                  for _ in range(rng.choice((1, 2, 3)))]
        args = []
        for i, shape in enumerate(shapes):
            attr = ""
            if rng.random() < 0.7:
                attr = f" {{sdy.sharding = #sdy.sharding{self.sharding(mesh, shape)}}}"
            args.append(f"%arg{i}: {self.ttype(shape)}{attr}")
            self.values.append((f"%arg{i}", shape))
        for _ in range(rng.randrange(1, 9)):
            self.op(mesh)
        results = rng.sample(self.values, min(len(self.values), rng.choice((1, 2))))
        res_types = []
        for _, shape in results:
            attr = ""
            if rng.random() < 0.2:
                attr = f" {{sdy.sharding = #sdy.sharding{self.sharding(mesh, shape)}}}"
            res_types.append(self.ttype(shape) + attr)
        head = (f"func.func @main({', '.join(args)}) -> ({', '.join(res_types)}) {{")
        ret = (f"  return {', '.join(v for v, _ in results)} : "
               f"{', '.join(self.ttype(s) for _, s in results)}")
        return "\n".join([mesh.text(), head] + self.lines + [ret, "}"] + self.funcs) + "\n"


#: (sdy-dl command without output options, the same as jaxlib passes)
COMMANDS = [
    (["propagate", "m.mlir"], "sdy-propagation-pipeline"),
    (["propagate", "m.mlir"], "sdy-propagation-pipeline"),
    (["propagate", "m.mlir"], "sdy-propagation-pipeline"),
    (["propagate", "m.mlir", "--explicit-collectives"],
     "sdy-propagation-pipeline,func.func(sdy-insert-explicit-reshards{enable-full-version=true}),"
     "func.func(sdy-reshard-to-collectives)"),
    (["propagate", "m.mlir", "--pass-option", "dedup-functions-fully=true"],
     "sdy-propagation-pipeline{dedup-functions-fully=true}"),
    (["pass", "aggressive-propagate", "m.mlir"], "sdy-aggressive-propagate"),
    (["pass", "basic-propagate", "m.mlir"], "sdy-basic-propagate"),
    (["pass", "op-priority-propagate", "m.mlir"], "sdy-op-priority-propagate"),
    (["pass", "import-pipeline", "m.mlir"], "sdy-import-pipeline"),
]


def random_module(rng: random.Random) -> str:
    return ModuleGen(rng, broken=rng.random() < 0.25).module()


# -- the other inputs --------------------------------------------------------------------------

SMALL = ('sdy.mesh @mesh = <["a"=2, "b"=2]>\n'
         'func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, '
         '[{"a"}, {}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {\n'
         '  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>\n'
         '  %1 = stablehlo.dot_general %0, %arg1, contracting_dims = [1] x [0] : '
         '(tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>\n'
         '  return %1 : tensor<8x8xf32>\n}\n')

OPTION_VALUES = {
    "propagation-strategy": ["basic", "aggressive", "basic-then-aggressive", "bogus", ""],
    "run-op-priority-propagation": ["true", "false", "1", "FALSE", "maybe"],
    "conservative-propagation": ["true", "false", "2"],
    "keep-sharding-rules": ["true", "false"],
    "dedup-functions-fully": ["true", "false", "yes"],
    "enable-insert-explicit-collectives": ["true", "false"],
    "module-dump-directory": ["", "/tmp/x"],
    "no-such-option": ["1"],
    "": ["x"],
}

RULE_PIECES = {
    "description": ["test", "", 3, None],
    "factors": [[{"size": "operands[0].shape[0]", "dims": {"all": 0}}],
                [{"size": 4, "dims": {"all": 0}}],
                [{"size": "operands[0].shape[0]", "dims": {"all": 0}, "kind": "reduction"}],
                [{"size": "operands[9].shape[0]", "dims": {"all": 0}}],
                [{"size": "1 +", "dims": {"all": 0}}],
                [{"dims": {"all": 0}}], "nonsense", [], None],
}


def rule_file(rng: random.Random) -> str:
    import yaml

    entry: dict = {"doc": rng.choice(["x", "", None])}
    factors = rng.choice(RULE_PIECES["factors"])
    if factors is not None:
        entry["factors"] = factors
    if rng.random() < 0.1:
        entry["unknown_key"] = 1
    doc: dict = {"description": rng.choice(RULE_PIECES["description"]),
                 "custom_calls": {rng.choice(["my_op", "other", ""]): entry}}
    if rng.random() < 0.1:
        doc = rng.choice([[1, 2], "text", {"custom_calls": None}])
    text = yaml.safe_dump(doc)
    if rng.random() < 0.1:
        text = text[: rng.randrange(len(text) + 1)]
    return text


CUSTOM_CALL = ('sdy.mesh @mesh = <["a"=2]>\n'
               'func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, '
               '[{"a"}]>}) -> tensor<8xf32> {\n'
               '  %0 = stablehlo.custom_call @my_op(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n'
               '  return %0 : tensor<8xf32>\n}\n')


# -- running -----------------------------------------------------------------------------------

class Worker:
    """The forking worker process (``tests/fuzz_worker.py``)."""

    def __init__(self):
        env = dict(os.environ)
        env.pop("SDY_DL_TRACEBACK", None)
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "fuzz_worker.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)

    def ask(self, case: dict) -> dict:
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the fuzz worker died")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(60)


@dataclass
class Tally:
    counts: dict = field(default_factory=lambda: {k: 0 for k in KINDS})
    cases: int = 0
    ran: int = 0        # exit 0
    errors: int = 0     # clean one-line errors
    compared: int = 0   # outputs compared with Shardy (or with the run replayed)
    shardy_crashed: int = 0   # inputs jaxlib's Shardy crashes on (not compared)
    found: list = field(default_factory=list)
    error_lines: list = field(default_factory=list)   # the clean error lines seen

    def bad(self, kind: str, what: str, case: dict, result: dict | None = None) -> None:
        self.counts[kind] += 1
        if len(self.found) < 20:
            err = (result or {}).get("stderr", "")[-300:]
            self.found.append((kind, what, case.get("argv"), err,
                               case.get("files", {}).get("m.mlir", "")[:2000]))


class Fuzzer:
    def __init__(self, seed: int, timeout: float = 120):
        self.rng = random.Random(seed)
        self.worker = Worker()
        self.tally = Tally()
        self.timeout = timeout
        self.root = tempfile.mkdtemp(prefix="sdy-dl-fuzz-")

    def close(self) -> None:
        self.worker.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def new_dir(self) -> str:
        return tempfile.mkdtemp(dir=self.root)

    def cli(self, argv: list[str], files: dict[str, str], streams: dict | None = None,
            stdin: str = "", outputs: tuple[str, ...] = ("out.mlir",)) -> tuple[dict, dict]:
        """Run ``sdy-dl ARGV`` in a fresh directory holding ``files``; judge the
        process (tracebacks, aborts, hangs, partial outputs); returns (case, result)."""
        d = self.new_dir()
        for name, text in files.items():
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(text)
        case = {"dir": d, "argv": argv, "files": files, "streams": streams or {},
                "stdin": stdin, "timeout": self.timeout}
        result = self.worker.ask(case)
        t = self.tally
        t.cases += 1
        result["out"] = {}
        for name in outputs:
            path = os.path.join(d, name)
            if os.path.isfile(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    result["out"][name] = f.read()
        if result["how"] == "signal":
            t.bad("abort", f"signal {result['code']}", case, result)
        elif result["how"] == "timeout":
            t.bad("hang", "timeout", case, result)
        else:
            err = result["stderr"]
            lines = err.splitlines()
            if "Traceback" in err or "internal error" in err:
                t.bad("traceback", "traceback", case, result)
            elif result["code"] == 0:
                t.ran += 1
            elif (streams or {}).get("stderr") == "closed":
                t.errors += 1
            elif len(lines) != 1 or not lines[0].startswith("sdy-dl: error: "):
                t.bad("traceback", "not one error line", case, result)
            else:
                t.errors += 1
                t.error_lines.append(lines[0])
            stray = [n for n in result["files"] if n.startswith(".sdy-dl")]
            if result["code"] != 0 and (result["out"] or stray):
                t.bad("partial", f"left {sorted(result['out']) + stray}", case, result)
        return case, result

    def shardy(self, module: str, pipeline: str = "sdy-propagation-pipeline") -> dict:
        return self.worker.ask({"kind": "shardy", "dir": self.new_dir(), "module": module,
                                "pipeline": pipeline, "timeout": self.timeout})

    # -- the case kinds --

    def module_case(self) -> None:
        """A random module through ``propagate``, compared with Shardy's pipeline."""
        from oracle import normalize

        module = random_module(self.rng)
        command, pipeline = self.rng.choice(COMMANDS)
        case, result = self.cli(command + ["-o", "out.mlir", "--quiet"], {"m.mlir": module})
        if result["how"] != "exit":
            return
        ref = self.shardy(module, pipeline)
        if ref["how"] != "exit":   # Shardy itself crashed or hung: nothing to compare with
            self.tally.shardy_crashed += 1
            return
        if ref["ok"] and result["code"] == 0:
            self.tally.compared += 1
            if normalize(result["out"].get("out.mlir", "")) != ref["output"]:
                self.tally.bad("unequal", "output differs from Shardy's", case, result)
        elif ref["ok"] and result["code"] != 0:
            if not any(w in result["stderr"] for w in DOCUMENTED_REFUSALS):
                self.tally.bad("unequal", "rejected what Shardy accepts", case, result)
        elif result["code"] == 0:
            self.tally.bad("unequal", f"accepted what Shardy rejects ({ref['error'][:200]})",
                           case, result)

    def stream_case(self) -> None:
        """A command with closed, full or redirected standard streams."""
        rng = self.rng
        module = rng.choice((SMALL, random_module(rng)))
        command = rng.choice((["propagate", "m.mlir"], ["show", "m.mlir"],
                              ["explain", "m.mlir", "--all"], ["conflicts", "m.mlir"],
                              ["report", "m.mlir"], ["propagate", "-"],
                              ["diff", "m.mlir", "m.mlir"],
                              ["rules", "annotate", "m.mlir"], ["passes"], ["--version"]))
        argv = list(command)
        if rng.random() < 0.5 and argv[0] in ("propagate", "report", "rules"):
            argv += ["-o", rng.choice(["out.mlir", "out.mlir", "-", "/dev/full", ""])]
        if argv[0] in ("propagate", "explain", "conflicts", "report"):
            argv.append("--quiet")
        streams = {name: rng.choice(choices) for name, choices in (
            ("stdin", ("file", "file", "closed")), ("stdout", ("file", "closed", "full")),
            ("stderr", ("file", "file", "closed")))}
        self.cli(argv, {"m.mlir": module}, streams, stdin=module)

    def options_case(self) -> None:
        """``propagate`` with random ``--pass-option`` items."""
        rng = self.rng
        argv = ["propagate", "m.mlir", "-o", "out.mlir", "--quiet"]
        for _ in range(rng.randrange(1, 4)):
            key = rng.choice(list(OPTION_VALUES))
            item = f"{key}={rng.choice(OPTION_VALUES[key])}"
            if rng.random() < 0.1:
                item = rng.choice(["novalue", "=", "==", "a=b=c"])
            argv += ["--pass-option", item]
        self.cli(argv, {"m.mlir": rng.choice((SMALL, random_module(rng)))})

    def rules_case(self) -> None:
        """A random rule file through ``rules check`` and ``propagate --rules``."""
        rng = self.rng
        text = rule_file(rng)
        if rng.random() < 0.5:
            self.cli(["rules", "check", "r.yaml"], {"r.yaml": text}, outputs=())
        else:
            self.cli(["propagate", "m.mlir", "--rules", "r.yaml", "-o", "out.mlir", "--quiet"],
                     {"m.mlir": CUSTOM_CALL, "r.yaml": text})

    def replay_case(self) -> None:
        """``emit``, the relations derived, changed at random, and ``propagate --relations``:
        a clean error, or exactly the module of the run the relations came from."""
        from facts_dirs import read_facts_dir, write_relations_dir
        from sdy_dl.datalog.program import Program, parse_declarations
        from sdy_dl.engines import get_engine

        rng = self.rng
        module = rng.choice((SMALL, random_module(rng)))
        _, first = self.cli(["propagate", "m.mlir", "-o", "out.mlir", "--quiet"],
                            {"m.mlir": module})
        if first.get("code") != 0 or first["how"] != "exit":
            return
        case, emitted = self.cli(["emit", "m.mlir", "--out-dir", "e", "--quiet"],
                                 {"m.mlir": module}, outputs=())
        if emitted.get("code") != 0 or emitted["how"] != "exit":
            return
        d = os.path.join(case["dir"], "e")
        with open(os.path.join(d, "program.dl"), encoding="utf-8") as f:
            text = f.read()
        program = Program(text, parse_declarations(text))
        derived = get_engine("python").run(program, read_facts_dir(program, d))
        write_relations_dir(program, derived, d)
        changed = self.corrupt(d)
        files = {"m.mlir": module}
        dd = self.new_dir()
        shutil.copytree(d, os.path.join(dd, "e"))
        with open(os.path.join(dd, "m.mlir"), "w", encoding="utf-8") as f:
            f.write(module)
        rcase = {"dir": dd, "argv": ["propagate", "m.mlir", "--relations", "e", "-o", "out.mlir",
                                     "--quiet"], "files": files, "timeout": self.timeout}
        result = self.worker.ask(rcase)
        self.tally.cases += 1
        out = os.path.join(dd, "out.mlir")
        if result["how"] == "timeout":
            self.tally.bad("hang", f"replay ({changed})", rcase, result)
        elif result["how"] == "signal":
            self.tally.bad("abort", f"replay ({changed})", rcase, result)
        elif "Traceback" in result["stderr"] or "internal error" in result["stderr"]:
            self.tally.bad("traceback", f"replay ({changed})", rcase, result)
        elif result["code"] == 0:
            self.tally.ran += 1
            self.tally.compared += 1
            with open(out, encoding="utf-8") as f:
                if f.read() != first["out"]["out.mlir"]:
                    self.tally.bad("unequal", f"replay ({changed}) gave another module", rcase,
                                   result)
        else:
            self.tally.errors += 1
            if os.path.exists(out):
                self.tally.bad("partial", f"replay ({changed})", rcase, result)

    def corrupt(self, d: str) -> str:
        """Change the relations or facts in ``d`` at random; what was changed."""
        rng = self.rng
        names = sorted(n for n in os.listdir(d) if n.endswith((".csv", ".facts")))
        name = rng.choice(names)
        path = os.path.join(d, name)
        with open(path, encoding="utf-8") as f:
            rows = f.read().splitlines()
        how = rng.choice(("delete", "empty", "drop", "duplicate", "swap", "number", "none"))
        if how == "delete":
            os.unlink(path)
            return f"{name} deleted"
        if how == "empty":
            rows = []
        elif how == "drop" and rows:
            rows.pop(rng.randrange(len(rows)))
        elif how == "duplicate" and rows:
            rows.append(rng.choice(rows))
        elif how == "swap" and len(rows) > 1:
            i, j = rng.sample(range(len(rows)), 2)
            fi, fj = rows[i].split("\t"), rows[j].split("\t")
            if len(fi) == len(fj) and len(fi) > 1:
                fi[-1], fj[-1] = fj[-1], fi[-1]
                rows[i], rows[j] = "\t".join(fi), "\t".join(fj)
        elif how == "number" and rows:
            i = rng.randrange(len(rows))
            fields = rows[i].split("\t")
            k = rng.randrange(len(fields))
            if fields[k].isdigit():
                fields[k] = str(int(fields[k]) + rng.choice((1, -1, 7)))
            rows[i] = "\t".join(fields)
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(r + "\n" for r in rows))
        return f"{name}: {how}"


#: The default mix of case kinds (weights).
MIX = {"module_case": 10, "stream_case": 3, "options_case": 2, "rules_case": 2, "replay_case": 1}


def run_cases(n: int, seed: int, timeout: float = 120) -> Tally:
    """``n`` cases of the mixed kinds; the tally of what they found."""
    fuzzer = Fuzzer(seed, timeout)
    kinds = [k for k, w in MIX.items() for _ in range(w)]
    try:
        for _ in range(n):
            getattr(fuzzer, fuzzer.rng.choice(kinds))()
    finally:
        fuzzer.close()
    return fuzzer.tally
