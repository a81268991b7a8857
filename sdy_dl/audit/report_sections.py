"""The report's "Communication" and "Memory" sections: each a function of the
page being built (see :mod:`sdy_dl.audit.report`, which registers them).

Communication is the collective ledger (:mod:`sdy_dl.audit.collectives`) of a
report made with explicit collectives (``sdy-dl report --pass-option
enable-insert-explicit-collectives=true``); without them the section says how
to get it.  Memory is the memory table (:mod:`sdy_dl.audit.memory`) of the
report's output module; each of its largest values says, per axis that could
shard it, why propagation did not (:mod:`sdy_dl.audit.why_not`, the first dim
only: a few step evaluations per value, for the top values only).
"""

from __future__ import annotations

from sdy_dl.audit.cost_model import human_bytes

#: How many of the largest replicated or partly sharded values the Memory section explains.
TOP = 10


def communication(page) -> str:
    from sdy_dl.audit.collectives import dims_text
    from sdy_dl.audit.cost_model import load_cost_model
    from sdy_dl.pipeline import ENABLE_INSERT_EXPLICIT_COLLECTIVES

    esc, audit = page.esc, page.audit
    if not audit.options[ENABLE_INSERT_EXPLICIT_COLLECTIVES]:
        return ("<p>The collective ledger needs a propagation with explicit collectives: "
                "make the report with <code>--pass-option enable-insert-explicit-collectives="
                "true</code>, or run <code>sdy-dl comms</code>.</p>")
    ledger = audit.collectives(load_cost_model())
    totals = ledger.totals()
    out = [f"<p>{totals['all']['count']} collectives, {esc(human_bytes(totals['all']['bytes_per_device']))}"
           " per device in all (bytes by the ring formulas; times estimated from "
           f"<code>{esc(ledger.cost_model.file)}</code>).</p>"]
    for what in ("kind", "axis", "function"):
        cells = "; ".join(f"{esc(k)} {row['count']}x {esc(human_bytes(row['bytes_per_device']))}"
                          for k, row in totals[what].items())
        if cells:
            out.append(f"<p>per {what}: {cells}</p>")
    out.append("<table><tr><th>kind</th><th>count</th><th>axes</th><th>bytes/device each</th>"
               "<th>in all</th><th>first</th><th>type</th><th>had</th><th>needed</th></tr>")
    for g in ledger.groups():
        e = g.first

        def side(s):
            values = "; ".join(f"{page.link(v['value'])} {esc(dims_text(v['sharding']))}"
                               for v in s.values)
            notes = "<br>".join(esc(a) for a in s.annotations[:3]) or "no input annotation"
            more = f" (+{len(s.annotations) - 3} more)" if len(s.annotations) > 3 else ""
            return f"{values} ({esc(s.op)} at {esc(s.place)})<br><small>{notes}{more}</small>"

        # (a collective the program wrote: its sides are its operands and results)
        written = "<small>written in the program; operand:</small> " if e.written else ""
        out.append(f"<tr><td>{esc(e.kind)}</td><td>{len(g.members)}</td>"
                   f"<td>{esc(', '.join(e.axes))}</td><td>{esc(human_bytes(e.bytes))}</td>"
                   f"<td>{esc(human_bytes(g.bytes))}</td><td>{page.link(e.name)} "
                   f"(output line {e.output_line})</td><td>{esc(e.type_text)}</td>"
                   f"<td>{written}{side(e.had)}</td><td>{side(e.needed)}</td></tr>")
    out.append("</table>")
    return "".join(out)


def memory(page) -> str:
    from sdy_dl.audit.collectives import dims_text
    from sdy_dl.audit.memory import PEAK_NOTE
    from sdy_dl.audit.why_not import why_not

    esc = page.esc
    table = page.audit.memory(TOP)
    out = ["<table><tr><th>function</th><th>arguments</th><th>results</th>"
           "<th>peak of live intermediates (estimate)</th></tr>"]
    for f in table.functions:
        out.append(f"<tr><td>{esc(f.function)}</td><td>{esc(human_bytes(f.arguments))}</td>"
                   f"<td>{esc(human_bytes(f.results))}</td><td>{esc(human_bytes(f.peak_intermediates))} "
                   f"(at {page.link(f.peak_at) if f.peak_at else '-'})</td></tr>")
    out.append(f"</table><p><small>Peak: {esc(PEAK_NOTE)}.</small></p>")
    out.append(f"<p>The {len(table.top)} largest replicated or partly sharded values:</p>"
               "<table><tr><th>value</th><th>op</th><th>type</th><th>sharding</th>"
               "<th>bytes/device</th><th>why</th><th>could shard, and why not</th></tr>")
    for u in table.top:
        v = u.value
        shard = "<br>".join(f"{esc(a)} on dim {', '.join(map(str, d))}: <small>why not: "
                            f"{esc(why_not(page.audit, v.name, a, d[0], limit=1).headline())}</small>"
                            for a, d in u.shardable.items()) or "no unused axis divides a dim"
        out.append(f"<tr><td>{page.link(v.name)}</td><td>{esc(v.op)}</td>"
                   f"<td>tensor&lt;{'x'.join(map(str, v.shape))}x{esc(v.element_type)}&gt;</td>"
                   f"<td>{esc(dims_text(v.sharding))}</td><td>{esc(human_bytes(v.bytes_per_device))}</td>"
                   f"<td>{'<br>'.join(esc(w) for w in u.why)}</td><td>{shard}</td></tr>")
    out.append("</table><p><small>Why not: where the axis stopped on its way to the value, on "
               "the first dim it could shard (<code>sdy-dl explain MODULE VALUE --why-not AXIS "
               "--dim D --proof</code>: every place, with the step program's derivation).</small></p>")
    return "".join(out)
