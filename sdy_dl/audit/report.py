"""``sdy-dl report``: the whole audit as one self-contained HTML page that opens fast
on a large module.

The page is a list of named sections (:data:`SECTIONS`), each a static HTML
fragment, followed by one compact JSON document (embedded once, in a
``<script type="application/json">``) and a small script that renders the
table of values and, when a row is opened, its derivation.  Derivations are
not stored as one tree per value (trees of neighbouring values share almost
everything): every derivation state ``(tracer key, write)`` is one node of a
DAG, stored once, and the page expands it on demand.

Built-in sections, in order: ``summary`` (meshes, how many values are sharded,
partially sharded and replicated, conflict groups), ``conflicts`` (one row per
group), ``values`` (the searchable table), ``communication`` (the collective
ledger, for a report made with explicit collectives) and ``memory`` (bytes per
device, the largest values with why not per axis that could shard them:
:mod:`sdy_dl.audit.report_sections`), ``module`` (the propagated module).

Adding a section
----------------
Register a :class:`Section` with :func:`register_section` (e.g. at import of
the module that computes it; ``order`` places it between the built-ins, which
use 10, 20, 30 and 90)::

    from sdy_dl.audit.report import Section, register_section

    register_section(Section("memory", "Memory", 40, lambda page: "<p>...</p>"))

``html(page)`` returns the section's body; ``page`` is the :class:`Page` being
built: ``page.audit`` (the :class:`~sdy_dl.audit.Audit`), ``page.esc`` (HTML
escape), ``page.link(name)`` (a link that opens the derivation of output value
``name``) and ``page.new_id(prefix)`` (an HTML id unique in the page).  The
section is wrapped in ``<section id="sec-NAME"><h2>TITLE</h2> ... </section>``
and listed in the page's table of contents.

Data (``<script id=data>``, compact JSON gzipped and base64-encoded, see
:func:`packed`): ``s`` a string table; ``v`` the values, one row
``[name, function, op, sharding, place, status, node]`` (string indices; status
0 replicated, 1 partially sharded, 2 sharded, 3 no sharding); ``n`` the nodes,
one row ``[what, sharding, kind, because, subs, factors, reasons, children]``:
``because`` a template whose ``\\u0001`` marks are filled with the string
indices ``subs`` in order, ``factors`` ``[[template, subs], ...]`` alike,
``children`` node indices; ``m`` the propagated module's text (shown when its
section is opened).
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from dataclasses import dataclass
from typing import Callable

from sdy_dl.audit import report_sections
from sdy_dl.audit.explain import Node, _text, shown_children
from sdy_dl.audit.tree_text import factor_text

#: The mark of a substituted part in a template string.
MARK = "\x01"


@dataclass
class Section:
    """A named section of the report: ``html(page) -> str`` is its body."""

    name: str                        # the HTML id is ``sec-NAME``
    title: str
    order: int
    html: Callable[["Page"], str]


#: The sections of the page, in order (see the module docstring).
SECTIONS: list[Section] = []


def register_section(section: Section) -> None:
    """Add ``section`` to every report (replacing one of the same name)."""
    SECTIONS[:] = sorted([s for s in SECTIONS if s.name != section.name] + [section],
                         key=lambda s: (s.order, s.name))


def anchor(name: str) -> str:
    """The page's fragment for output value ``name`` (``#v-...`` opens its derivation)."""
    return "v-" + re.sub(r"[^A-Za-z0-9_-]", lambda m: f"_{ord(m.group()):x}", name)


class Page:
    """One report being built: the audit, helpers for sections, the ids in use."""

    def __init__(self, audit):
        self.audit = audit
        self.esc = html.escape
        self.known = {out.name for out in audit.outputs.values}
        self._ids: set[str] = set()

    def new_id(self, prefix: str) -> str:
        """An HTML id starting with ``prefix``, unique in the page."""
        n, candidate = 0, prefix
        while candidate in self._ids:
            n += 1
            candidate = f"{prefix}-{n}"
        self._ids.add(candidate)
        return candidate

    def link(self, name: str) -> str:
        """``name``, linked to its value's derivation when it is an output value."""
        if name not in self.known:
            return self.esc(name)
        return f'<a href="#{anchor(name)}" class=vl>{self.esc(name)}</a>'


# -- the data ------------------------------------------------------------------------------

class _Strings:
    def __init__(self):
        self.items: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        i = self.index.get(text)
        if i is None:
            i = self.index[text] = len(self.items)
            self.items.append(text)
        return i


def _template(text: str, subs: list[str]) -> tuple[str, list[str]]:
    """``text`` with the first occurrence (left to right) of each of ``subs`` marked."""
    out, at, used = [], 0, []
    for sub in subs:
        k = text.find(sub, at) if sub else -1
        if k < 0:
            continue
        out.append(text[at:k] + MARK)
        used.append(sub)
        at = k + len(sub)
    out.append(text[at:])
    return "".join(out), used


def status(sharding, meshes) -> int:
    """0 replicated, 1 partially sharded, 2 sharded over every device, 3 no sharding."""
    from math import prod

    if sharding is None:
        return 3
    mesh = meshes.get(sharding.mesh) if isinstance(sharding.mesh, str) else sharding.mesh
    sizes = {a.name: a.size for a in mesh.axes} if mesh is not None else {}
    used = prod(a.size if a.size is not None else sizes.get(a.name, 1)
                for d in sharding.dims for a in d.axes)
    total = prod(sizes.values()) if sizes else 1
    return 0 if used <= 1 else 2 if used >= total else 1


class _Dag:
    """Derivation nodes, each stored once: tracer states ``(key, write)`` and the
    nodes the explainer adds at a value's root (export, function results, ...)."""

    def __init__(self, explainer, strings: _Strings):
        self.explainer = explainer
        self.tracer = explainer.tracer
        self.s = strings
        self.rows: list[list] = []
        self.by_state: dict = {}
        self.by_value: dict[str, int] = {}    # output value name -> its root node

    def _row(self, n: Node, children: list[int]) -> int:
        s = self.s
        place = None
        if n.op:   # the op's place as the text cites it (output line, input place)
            place = (self.explainer.op_place(n.op) if n.op.get("tag") is not None
                     else n.op.get("place"))
        because, subs = _template(n.because, [place] if place else [])
        factors = []
        for f in n.factors:
            names = [x["value"] for x in f["from"]]
            marked = dict(f, **{"from": [dict(x, value=MARK) for x in f["from"]]})
            factors.append([s(factor_text(marked)), [s(v) for v in names]])
        self.rows.append([s(n.what), s(n.sharding), s(n.kind), s(because), [s(x) for x in subs],
                          factors, [s(r) for r in n.reasons if r != n.because], children])
        return len(self.rows) - 1

    def state(self, key, before: int) -> int | None:
        """The node of ``key``'s sharding before write ``before`` (iteratively: chains
        of writes can be as long as the module)."""
        tracer = self.tracer
        explainer = self.explainer
        root = (key, tracer.last_write(key, before))
        if root in self.by_state:
            return self.by_state[root]
        stack = [root]
        while stack:
            k, w = stack[-1]
            if (k, w) in self.by_state:
                stack.pop()
                continue
            if w is None:
                from sdy_dl.audit.provenance import Derivation

                initial = tracer.initial.get(k)
                self.by_state[(k, w)] = None if initial is None else self._row(
                    explainer.leaf(Derivation(k, initial, None), explainer.key_name(k)), [])
                stack.pop()
                continue
            write = tracer.writes[w]
            cause = write.cause
            states = [(kk, tracer.last_write(kk, cause.first))
                      for kk in tracer._read_keys(write)]
            missing = [st for st in states if st not in self.by_state]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            from sdy_dl.audit.provenance import Derivation

            node = explainer._node(Derivation(k, write.sharding, write))
            keyed = explainer._factor_pair(cause, k)[0] if cause.step is not None else []
            wanted = {d.key for d in shown_children(k, keyed, [Derivation(kk, None, None)
                                                               for kk, _ in states])}
            children = [self.by_state[st] for st in states if st[0] in wanted]
            self.by_state[(k, w)] = self._row(node, [c for c in children if c is not None])
        return self.by_state[root]

    def value(self, out) -> int:
        """The root node of output value ``out``."""
        if out.name in self.by_value:
            return self.by_value[out.name]
        explainer = self.explainer
        root = explainer.explain(out, depth=0)   # (the DAG gives what is below)
        self.by_value[out.name] = self._convert(root, out)
        return self.by_value[out.name]

    def _convert(self, n: Node, out) -> int:
        """A shallow tree of the explainer as nodes: its step nodes (the final writes of
        their keys) are the DAG's states; an export-created value's operands are
        their own values' roots."""
        if n.cause is not None and n.key is not None:
            i = self.state(n.key, len(self.tracer.writes))
            if n.what != self.explainer.key_name(n.key) or n.reasons:
                row = list(self.rows[i])
                row[0] = self.s(n.what)
                row[6] = [self.s(r) for r in n.reasons if r != n.because]
                self.rows.append(row)
                return len(self.rows) - 1
            return i
        if n.kind == "export" and out.key is None and n.op is not None:
            children = [self.value(src) for src in self.explainer.operand_values(out)]
        else:
            children = [self._convert(c, out) for c in n.children]
        return self._row(n, children)


def page_data(page: Page) -> dict:
    """The JSON document of the page (see the module docstring)."""
    audit = page.audit
    strings = _Strings()
    explainer = audit.explainer
    explainer.prepare_all()
    dag = _Dag(explainer, strings)
    meshes = audit.propagated.meshes
    rows = []
    for out in audit.outputs.values:
        sharding = out.sharding
        rows.append([strings(out.name), strings(out.func), strings(out.op), strings(_text(sharding)),
                     strings(out.place), status(sharding, meshes), dag.value(out)])
    return {"s": strings.items, "v": rows, "n": dag.rows, "m": audit.text}


# -- the sections --------------------------------------------------------------------------

def _summary(page: Page) -> str:
    audit, esc = page.audit, page.esc
    counts = [0, 0, 0, 0]
    for out in audit.outputs.values:
        counts[status(out.sharding, audit.propagated.meshes)] += 1
    groups = audit.conflict_groups()
    meshes = "".join(f"<li><code>@{esc(name)} = {esc(mesh.to_text())}</code></li>"
                     for name, mesh in sorted(audit.propagated.meshes.items()))
    labels = ("replicated", "partially sharded", "sharded over every device", "no sharding")
    tallies = "".join(f"<tr><td>{labels[k]}</td><td>{counts[k]:,}</td></tr>" for k in (2, 1, 0, 3))
    return (f"<p>{len(audit.outputs.values):,} values in the propagated module; "
            f"{sum(g.count for g in groups):,} conflicts in {len(groups):,} groups "
            f"(<a href=#sec-conflicts>below</a>).</p>"
            f"<h3>Meshes</h3><ul>{meshes or '<li>none</li>'}</ul>"
            f"<h3>Values</h3><table class=sum>{tallies}</table>")


def _conflicts(page: Page) -> str:
    esc, link = page.esc, page.link
    groups = page.audit.conflict_groups()
    if not groups:
        return "<p>No conflicts.</p>"
    rows = []
    for g in groups:
        c = g.example
        comps = "".join(
            f"<div>{link(x['value'])} ({esc(x['tensor'])} dim {x['dim']}, factor "
            f"{esc(x['factor'])}): [{esc(', '.join(x['axes']))}]"
            + (f" replicated {esc(', '.join(x['replicated']))}" if x["replicated"] else "")
            + (" <b>kept</b>" if x["won"] else "")
            + "".join(f"<div class=b>{esc(o['axis'])} &larr; {esc('; '.join(o['from']))}</div>"
                      for o in x["origins"]) + "</div>"
            for x in c.competitors)
        shown = g.members[:50]
        members = ", ".join(f"{link(m['value'])} <span class=b>{esc(m['place'])}</span>"
                            for m in shown)
        if g.count > len(shown):
            members += f", &hellip; ({g.count - len(shown):,} more: <code>sdy-dl conflicts --format json</code>)"
        on = (f"axis {esc(c.axis)} on factors {esc(c.factor)}" if c.kind == "across-factor"
              else f"factor {esc(c.factor)}" + (f", axis {esc(c.axis)}" if c.axis else ""))
        kept = "; ".join(f"{esc(f)}: [{esc(', '.join(a))}]" for f, a in c.kept.items())
        rows.append(f"<tr><td><b>{g.count}</b></td><td><code>{esc(c.op)}</code><div class=b>"
                    f"{esc(c.rule)}</div></td><td>{on}<div class=b>{esc(c.kind)}</div></td>"
                    f"<td>{comps}</td><td>{kept}<div class=b>{esc(c.decided_text)}</div></td>"
                    f"<td>{esc(c.output_text)}</td><td><details><summary>{g.count} at</summary>"
                    f"{members}</details></td></tr>")
    return ("<table id=conflicts><tr><th>count</th><th>op and rule</th><th>on</th>"
            "<th>competitors (&larr; the annotations each axis came from)</th>"
            "<th>kept; decided by</th><th>what the output does</th><th>members</th></tr>"
            + "".join(rows) + "</table>")


def _values(page: Page) -> str:
    return ("<p class=b>Filter by any column (substring, case-insensitive); click a row to "
            "open its derivation (two levels), a node's &#9656; to expand it.</p>"
            "<table id=values><thead><tr><th>value</th><th>function</th><th>op</th>"
            "<th>sharding</th><th>source</th><th>status</th></tr><tr class=flt>"
            + "".join(f'<th><input data-col="{k}" placeholder="filter" aria-label="filter {c}">'
                      "</th>" for k, c in enumerate(("value", "function", "op", "sharding",
                                                     "source")))
            + '<th><select data-col="5" aria-label="filter status"><option value="">all</option>'
              "<option value=2>sharded</option><option value=1>partially sharded</option>"
              "<option value=0>replicated</option><option value=3>no sharding</option></select>"
              "</th></tr></thead><tbody id=rows></tbody></table>"
              "<p id=more-row><span id=shown></span> <button id=more type=button>show more"
              "</button></p>")


def _module(page: Page) -> str:
    return (f"<details id=module-box><summary>the module as <code>sdy-dl propagate</code> "
            f"prints it ({page.audit.text.count(chr(10)):,} lines)</summary><pre id=module>"
            "</pre></details>")


for _s in (Section("summary", "Summary", 10, _summary),
           Section("conflicts", "Conflicts", 20, _conflicts),
           Section("values", "Values", 30, _values),
           Section("communication", "Communication", 40, report_sections.communication),
           Section("memory", "Memory", 50, report_sections.memory),
           Section("module", "Propagated module", 90, _module)):
    register_section(_s)


# -- the page --------------------------------------------------------------------------------

_CSS = """
body{font-family:sans-serif;margin:1.5em;max-width:120em}
code,pre,.s{font-family:monospace}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
#values tbody tr.r{cursor:pointer}#values tbody tr.r:hover{background:#f3f6ff}
.flt input,.flt select{width:100%;box-sizing:border-box}
ul.t{list-style:none;padding-left:1.2em;border-left:1px dotted #999;margin:2px 0}
.b{color:#555;font-size:90%}.f{color:#064}.w{color:#a40}.x{cursor:pointer;color:#06c}
nav a{margin-right:1em}
"""

_JS = r"""
(async function(){
const b64=document.getElementById('data').textContent;
const zipped=Uint8Array.from(atob(b64),c=>c.charCodeAt(0));
const D=JSON.parse(await new Response(new Blob([zipped]).stream()
  .pipeThrough(new DecompressionStream('gzip'))).text());
const box=document.getElementById('module-box');
if(box)box.addEventListener('toggle',()=>{const pre=document.getElementById('module');
  if(box.open&&!pre.textContent)pre.textContent=D.m;});
const S=D.s,V=D.v,N=D.n,ST=['replicated','partially sharded','sharded','no sharding'];
const PAGE=200;let limit=PAGE,match=[];
const byName=new Map();V.forEach((r,i)=>byName.set(S[r[0]],i));
const tbody=document.getElementById('rows');
const filters=[...document.querySelectorAll('#values .flt [data-col]')];
function fill(t,subs){let k=0;return S[t].replace(/\u0001/g,()=>S[subs[k++]]);}
function el(tag,cls,text){const e=document.createElement(tag);if(cls)e.className=cls;if(text!=null)e.textContent=text;return e;}
function anchor(name){return 'v-'+name.replace(/[^A-Za-z0-9_-]/g,c=>'_'+c.charCodeAt(0).toString(16));}
function nodeLi(i){
  const n=N[i],li=el('li');
  const head=el('div');
  const tog=el('span','x',n[7].length?'\u25b8 ':'\u00a0\u00a0');
  head.appendChild(tog);
  const what=S[n[0]];
  if(byName.has(what)){const a=el('a','vl',what);a.href='#'+anchor(what);head.appendChild(a);}
  else head.appendChild(el('span','',what));
  head.appendChild(document.createTextNode(' = '));head.appendChild(el('span','s',S[n[1]]));
  li.appendChild(head);
  li.appendChild(el('div','b','because: '+fill(n[3],n[4])));
  n[5].forEach(f=>li.appendChild(el('div','f',fill(f[0],f[1]))));
  n[6].forEach(r=>li.appendChild(el('div','w','why not more: '+S[r])));
  if(n[7].length){let ul=null;tog.onclick=()=>{
    if(!ul){ul=el('ul','t');n[7].forEach(c=>ul.appendChild(nodeLi(c)));li.appendChild(ul);tog.textContent='\u25be ';}
    else{const open=ul.style.display!=='none';ul.style.display=open?'none':'';tog.textContent=open?'\u25b8 ':'\u25be ';}};}
  return li;
}
function expand(li,levels){
  const t=li.querySelector(':scope>div>.x');
  if(!levels||!t||!t.textContent.startsWith('\u25b8'))return;
  t.click();li.querySelectorAll(':scope>ul>li').forEach(c=>expand(c,levels-1));
}
function open(row,i){
  const next=row.nextSibling;
  if(next&&next.classList&&next.classList.contains('d')){next.remove();return;}
  const tr=el('tr','d'),td=el('td');td.colSpan=6;
  const ul=el('ul','t');ul.appendChild(nodeLi(V[i][6]));td.appendChild(ul);tr.appendChild(td);
  row.after(tr);expand(ul.firstChild,2);
}
function rowFor(i){
  const r=V[i],tr=el('tr','r');tr.id=anchor(S[r[0]]);
  [r[0],r[1],r[2],r[3],r[4]].forEach((s,k)=>tr.appendChild(el('td',k==3?'s':(k==0?'s':''),S[s])));
  tr.appendChild(el('td','',ST[r[5]]));
  tr.onclick=e=>{if(e.target.tagName!=='A')open(tr,i);};
  return tr;
}
function apply(){
  const want=filters.map(f=>f.value.trim().toLowerCase());
  match=[];
  for(let i=0;i<V.length;i++){const r=V[i];let ok=true;
    for(let k=0;k<5&&ok;k++)if(want[k]&&S[r[k]].toLowerCase().indexOf(want[k])<0)ok=false;
    if(ok&&want[5]!==''&&String(r[5])!==want[5])ok=false;
    if(ok)match.push(i);}
  render();
}
function render(){
  tbody.textContent='';const frag=document.createDocumentFragment();
  match.slice(0,limit).forEach(i=>frag.appendChild(rowFor(i)));tbody.appendChild(frag);
  document.getElementById('shown').textContent=Math.min(limit,match.length)+' of '+match.length+' matching values shown';
  document.getElementById('more').style.display=match.length>limit?'':'none';
}
filters.forEach(f=>f.addEventListener('input',()=>{limit=PAGE;apply();}));
document.getElementById('more').onclick=()=>{limit+=PAGE*5;render();};
function go(){
  const h=decodeURIComponent(location.hash.slice(1));if(!h.startsWith('v-'))return;
  let i=-1;for(let k=0;k<V.length;k++)if(anchor(S[V[k][0]])===h){i=k;break;}
  if(i<0)return;
  filters.forEach(f=>f.value='');filters[0].value=S[V[i][0]];limit=PAGE;apply();
  const row=match.map(rowFor);tbody.textContent='';row.forEach(r=>tbody.appendChild(r));
  const tr=row.find(r=>r.id===h);if(tr){open(tr,i);tr.scrollIntoView();}
}
window.addEventListener('hashchange',go);
apply();performance.mark('values-shown');if(location.hash)go();
})();
"""


def packed(data: dict) -> str:
    """``data`` as compact JSON, gzipped (reproducibly: no time stamp) and base64-encoded:
    the page unpacks it with the browser's ``DecompressionStream``."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.b64encode(gzip.compress(text, compresslevel=6, mtime=0)).decode()


def unpacked(text: str) -> dict:
    """:func:`packed` read back (for tests and tools)."""
    return json.loads(gzip.decompress(base64.b64decode(text)))


def html_chunks(audit):
    """The page in pieces: the sections, then the data and the script."""
    page = Page(audit)
    esc = page.esc
    for s in SECTIONS:
        page.new_id(f"sec-{s.name}")
    for fixed in ("data", "values", "rows", "conflicts", "module", "module-box", "more", "more-row",
                  "shown"):
        page._ids.add(fixed)
    yield ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
           f"<title>sdy-dl report: {esc(audit.file)}</title><style>{_CSS}</style></head><body>"
           f"<h1>sdy-dl report: <code>{esc(audit.file)}</code></h1><nav>"
           + "".join(f'<a href="#sec-{s.name}">{esc(s.title)}</a>' for s in SECTIONS) + "</nav>")
    for s in SECTIONS:
        yield f'<section id="sec-{s.name}"><h2>{esc(s.title)}</h2>{s.html(page)}</section>'
    yield (f'<script type="application/gzip+base64" id=data>{packed(page_data(page))}</script>'
           f"<script>{_JS}</script></body></html>\n")
