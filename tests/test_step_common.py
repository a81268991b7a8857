"""Helpers for the step tests: one op between func args and a return, run
through Shardy (jaxlib) and through one Datalog step, compared tensor by tensor.

A case is a module with one mesh (or several), a function whose arguments are
the op's operands (with shardings) and whose results are the op's results
(the op may carry result shardings).  Shardy's basic/aggressive pass applies
exactly one step to the op; ``run_oracle`` returns the rule Shardy attached
and the final shardings of the args and the op results, ``build_step`` the
matching StepInput, ``check_batch`` compares a batch evaluated in one engine
call.  Shardings are compared after ``normalize`` (a missing sharding and a
fully open, empty one are the same to propagation; Shardy writes the latter
onto an op's other results when it updates one).
"""

from __future__ import annotations

import functools

from sdy_dl.engines import get_engine
from sdy_dl.propagation.step import StepInput
from sdy_dl.propagation.step_eval import evaluate_steps
from sdy_dl.rules.instance import RuleInstance
from sdy_dl.rules.rule_attr import rule_of_attr
from sdy_dl.ir.sdy_attrs import mesh_of_attr, per_value_of_attr, sharding_of_attr
from sdy_dl.sharding import Mesh, TensorSharding

ELEMENTWISE_OPS = {
    "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.maximum",
    "stablehlo.negate", "stablehlo.abs", "stablehlo.sine", "stablehlo.cosine",
    "stablehlo.exponential", "stablehlo.tanh", "stablehlo.select", "stablehlo.convert",
    "stablehlo.divide", "stablehlo.minimum", "stablehlo.clamp", "stablehlo.compare",
    "sdy.sharding_constraint",
}


def module_text(meshes: dict[str, str], args: list[tuple[str, str | None]], op_line: str,
                results: list[str]) -> str:
    """A module: ``meshes`` {name: "<[...]>"}, args [(type, sharding or None)], the op line
    (assigning ``%0`` or ``%0:N``), and the result types returned."""
    lines = ["module {"]
    for name, body in meshes.items():
        lines.append(f"  sdy.mesh @{name} = {body}")
    arg_txt = ", ".join(
        f"%arg{i}: {t}" + (f" {{sdy.sharding = #sdy.sharding{s}}}" if s else "")
        for i, (t, s) in enumerate(args))
    lines.append(f"  func.func @main({arg_txt}) -> ({', '.join(results)}) {{")
    lines.append(f"    {op_line}")
    if len(results) == 1:
        rets = "%0"
    else:
        rets = ", ".join(f"%0#{i}" for i in range(len(results)))
    lines.append(f"    return {rets} : {', '.join(results)}")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


@functools.lru_cache(maxsize=4096)
def run_oracle(text: str, pipeline: str):
    """(meshes, rule text or None, arg shardings, op result shardings, op name) after ``pipeline``."""
    from jaxlib.mlir import ir, passmanager

    from sdy_dl.ir.context import mlir_context

    with mlir_context():
        module = ir.Module.parse(text)
        passmanager.PassManager.parse(f"builtin.module({pipeline})").run(module.operation)
        meshes: dict[str, Mesh] = {}
        func = None
        for op in module.body.operations:
            name = op.operation.name
            if name == "sdy.mesh":
                sym = ir.StringAttr(op.attributes["sym_name"]).value
                meshes[sym] = mesh_of_attr(op.attributes["mesh"])
            elif name == "func.func":
                func = op
        assert func is not None
        args = []
        arg_attrs = func.attributes["arg_attrs"] if "arg_attrs" in func.attributes else None
        n_args = len(func.regions[0].blocks[0].arguments)
        for i in range(n_args):
            s = None
            if arg_attrs is not None:
                d = ir.DictAttr(arg_attrs[i])
                if "sdy.sharding" in d:
                    s = sharding_of_attr(d["sdy.sharding"])
            args.append(s)
        ops = [o for o in func.regions[0].blocks[0].operations if o.operation.name != "func.return"]
        assert len(ops) == 1, [o.operation.name for o in ops]
        op = ops[0]
        rule = str(op.attributes["sdy.sharding_rule"]) if "sdy.sharding_rule" in op.attributes else None
        res = [None] * len(op.results)
        if "sdy.sharding" in op.attributes:
            res = list(per_value_of_attr(op.attributes["sdy.sharding"]))
        return meshes, rule, tuple(args), tuple(res), op.operation.name


def pass_pipeline(strategy: str, conservative: bool) -> str:
    opts = "keep-sharding-rules=true" + (" conservative-propagation=true" if conservative else "")
    return f"sdy-{strategy}-propagate{{{opts}}}"


def normalize(s: TensorSharding | None) -> TensorSharding | None:
    """None for a missing or fully open, empty sharding (equivalent for propagation)."""
    if s is None:
        return None
    if not s.replicated and not s.unreduced and all(not d.axes and not d.is_closed and d.priority is None
                                                     for d in s.dims):
        return None
    return s


@functools.lru_cache(maxsize=4096)
def _read_initial(text: str):
    """Meshes, arg shardings and op result shardings as written (no pass)."""
    return run_oracle(text, "")


def build_step(text: str, strategy: str = "aggressive", conservative: bool = False,
               elementwise: bool | None = None, rule: RuleInstance | None = None,
               directions: tuple[str, ...] | None = None, symbol: str | None = None):
    """(StepInput, meshes, expected final shardings, rule text) of the module ``text``.

    ``symbol`` renames the mesh ``@mesh`` (to put many cases into one batch)."""
    meshes, _, args, res, op_name = _read_initial(text)
    _, rule_text, exp_args, exp_res, _ = run_oracle(text, pass_pipeline(strategy, conservative))
    if rule is None:
        assert rule_text is not None, f"Shardy attached no rule to {op_name}"
        from jaxlib.mlir import ir

        from sdy_dl.ir.context import mlir_context

        with mlir_context():
            rule = rule_of_attr(ir.Attribute.parse(rule_text))
    ew = op_name in ELEMENTWISE_OPS if elementwise is None else elementwise
    if symbol is not None:
        meshes = {(symbol if k == "mesh" else f"{symbol}_{k}"): v for k, v in meshes.items()}

        def ren(s):
            if s is None:
                return None
            return TensorSharding(symbol if s.mesh == "mesh" else f"{symbol}_{s.mesh}",
                                  s.dims, s.replicated, s.unreduced)
        args, res, exp_args, exp_res = (tuple(map(ren, x)) for x in (args, res, exp_args, exp_res))
    step = StepInput(rule=rule, operands=tuple(args), results=tuple(res),
                     directions=directions or ("BOTH",) * len(rule.factors), strategy=strategy,
                     conservative=conservative, elementwise=ew)
    return step, meshes, [normalize(s) for s in list(exp_args) + list(exp_res)], rule_text or rule.to_text()


def final_shardings(step: StepInput, out) -> list:
    """Each tensor's sharding after the step (normalized)."""
    return [normalize(n if n is not None else o)
            for n, o in zip(out.operands + out.results, step.operands + step.results)]


def describe(text: str, info: str, got, want) -> str:
    lines = [info, text]
    for i, (g, w) in enumerate(zip(got, want)):
        lines.append(f"{'  ' if g == w else '!!'} tensor {i}: shardy {w.to_text() if w else None}  "
                     f"ours {g.to_text() if g else None}")
    return "\n".join(lines)


def check_case(text: str, strategy: str = "aggressive", conservative: bool = False,
               engine: str = "clingo", elementwise: bool | None = None, **kw) -> dict:
    """Compare Shardy's one step with ours on the module ``text``; return details."""
    step, meshes, want, rule_text = build_step(text, strategy, conservative, elementwise, **kw)
    out = evaluate_steps(get_engine(engine), [step], meshes)[0]
    return {"rule": rule_text, "got": final_shardings(step, out), "want": want, "step": step, "out": out}


def assert_case(text: str, strategy: str = "aggressive", conservative: bool = False,
                engine: str = "clingo", elementwise: bool | None = None, **kw) -> None:
    r = check_case(text, strategy, conservative, engine, elementwise, **kw)
    if r["got"] != r["want"]:
        raise AssertionError(describe(text, f"{strategy} conservative={conservative} rule: {r['rule']}",
                                      r["got"], r["want"]))


def check_batch(cases, engine: str = "clingo") -> list:
    """Evaluate cases [(text, strategy, conservative)] in ONE engine call (each case with its own
    mesh symbols) and assert every tensor equals Shardy's.  Returns the StepOutputs."""
    steps, wants, infos, meshes = [], [], [], {}
    for n, (text, strategy, conservative) in enumerate(cases):
        step, ms, want, rule_text = build_step(text, strategy, conservative, symbol=f"m{n}")
        steps.append(step)
        wants.append(want)
        infos.append((text, f"{strategy} conservative={conservative} rule: {rule_text}"))
        meshes.update(ms)
    outs = evaluate_steps(get_engine(engine), steps, meshes)
    for step, out, want, (text, info) in zip(steps, outs, wants, infos):
        got = final_shardings(step, out)
        if got != want:
            raise AssertionError(describe(text, info, got, want))
    return outs


def sh(text: str) -> str:
    """A sharding body, e.g. sh('@mesh, [{"a"}, {}]') -> '<@mesh, [{"a"}, {}]>'."""
    return f"<{text}>"

