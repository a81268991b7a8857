"""The pass catalog (``docs/passes.md``), generated from the registry.

For every registered pass: the Shardy folder it lives in (``import``,
``propagation``, ``export``), its one-line summary, the options it reads
(declared with the pass) and where Shardy's pipelines run it.
``sdy-dl passes --format markdown`` prints it; a test keeps the file current.
"""

from __future__ import annotations

from sdy_dl.passes import PASSES, PassOptions
from sdy_dl.passes.import_.import_pipeline import DEDUP_FUNCTIONS_FULLY
from sdy_dl.pipeline import EXPLICIT_COLLECTIVES, PIPELINE, pipeline_options, split_stage, stages

#: Shardy's folder of a pass, from the subpackage its module lives in.
_FOLDERS = {"import_": "import", "propagation": "propagation", "export": "export"}


def folder(name: str) -> str:
    """The Shardy transforms folder pass ``name`` lives in (``import``, ...)."""
    parts = PASSES[name].run.__module__.split(".")
    return _FOLDERS.get(parts[2], parts[2]) if len(parts) > 3 else "-"


def pipeline_uses() -> dict[str, list[str]]:
    """Pass name -> the pipelines that run it, as ``propagate`` runs them."""
    from sdy_dl.passes.export import export_pipeline
    from sdy_dl.passes.import_ import import_pipeline

    uses: dict[str, list[str]] = {}
    runs = []
    for dedup in (False, True):
        mode = "dedup-functions-fully" if dedup else "default"
        runs.append((f"import-pipeline ({mode})", import_pipeline.pipeline_passes(dedup)))
        runs.append((f"propagate ({mode})",
                     stages(PassOptions(values={DEDUP_FUNCTIONS_FULLY.name: dedup}))))
    runs.append(("export-pipeline", export_pipeline.pipeline_passes()))
    runs.append(("export-pipeline (explicit-collectives)", EXPLICIT_COLLECTIVES))
    for label, names in runs:
        for name in dict.fromkeys(split_stage(n)[0] for n in names):
            uses.setdefault(name, []).append(label)
    return uses


def readers_of(option) -> list[str]:
    """The passes that declare ``option``, and the pipeline, which reads them all."""
    return sorted(name for name, spec in PASSES.items() if option in spec.options) + [PIPELINE]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def catalog_markdown() -> str:
    """The text of ``docs/passes.md``."""
    import sdy_dl.passes.all  # noqa: F401  (registers every pass)
    uses = pipeline_uses()
    lines = ["# Pass catalog", "",
             "Generated from the pass registry by `sdy-dl passes --format markdown`",
             "(`tests/test_docs.py` checks that this file is current).  Every pass is",
             "run alone by `sdy-dl pass NAME MODULE`; names are Shardy's without `sdy-`.",
             "", "| pass | folder | summary | options | run by |", "|---|---|---|---|---|"]
    order = {"import": 0, "propagation": 1, "export": 2}
    for name in sorted(PASSES, key=lambda n: (order.get(folder(n), 3), n)):
        options = ", ".join(f"`{o.name}`" for o in PASSES[name].options) or "—"
        run_by = ", ".join(uses.get(name, [])) or "—"
        lines.append(f"| `{name}` | {folder(name)} | {_cell(PASSES[name].help)} | {options} "
                     f"| {run_by} |")
    lines += ["", "## Options", "",
              "`--pass-option NAME=VALUE`; `sdy-dl propagate` takes the options of every",
              "pass it runs.", "", "| option | type | default | read by | summary |",
              "|---|---|---|---|---|"]
    for option in pipeline_options():
        note = "" if option.implemented else " Only the default is implemented."
        readers = ", ".join(f"`{p}`" for p in readers_of(option))
        default = option.default_text() or '""'
        lines.append(f"| `{option.name}` | {_cell(option.type_text())} | "
                     f"`{default}` | {readers} | "
                     f"{_cell(option.help)}{note} |")
    return "\n".join(lines) + "\n"
