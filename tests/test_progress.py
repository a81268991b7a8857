"""The progress display: rows that name what runs, counts that never go back."""

from __future__ import annotations

import io

from rich.console import Console

from sdy_dl.progress import Display, FixpointCounts, Stage


class _Recorder(Stage):
    def __init__(self):
        super().__init__(None, None, "user-priority-propagate")
        self.details, self.phases = [], []

    def detail(self, text):
        self.details.append(text)

    def phase(self, text):
        self.phases.append(text)


def test_visits_are_totals_over_the_fixpoints_of_a_pass():
    stage = _Recorder()
    phase = ["user priority 0, op-priority band 0"]
    report = FixpointCounts(stage, lambda: phase[0])
    # the driver reports every 512 visits of each fixpoint; steps and calls are the pass's
    for popped, pending, steps, calls, band in [(512, 900, 10, 2, 0), (1024, 20, 30, 5, 0),
                                                (512, 300, 40, 6, 1), (512, 10, 45, 7, 2),
                                                (1024, 0, 50, 8, 2)]:
        phase[0] = f"user priority 0, op-priority band {band}"
        report(popped, pending, steps, calls)
    visits = [int(d.split(" visits")[0]) for d in stage.details]
    assert visits == [512, 1024, 1536, 2048, 2560]
    assert visits == sorted(visits)
    assert stage.phases == [f"user priority 0, op-priority band {b}" for b in (0, 1, 2)]


def test_every_value_explained_is_a_stage_with_a_bar(monkeypatch):
    import jax_programs

    from sdy_dl.audit import Audit
    from sdy_dl.ir import parse_module_text
    from sdy_dl.pipeline import make_options

    audit = Audit(parse_module_text(jax_programs.lowered("mlp")),
                  make_options(engine="clingo", quiet=True))
    screen = io.StringIO()
    audit.display = Display(0, False, console=Console(file=screen, force_terminal=True, width=300))
    trees = list(audit.iter_explain_all())
    assert len(trees) == len(audit.outputs.values)
    shown = screen.getvalue()
    assert "explaining every value" in shown and "factor records of" in shown
    audit.conflicts()
    assert "conflicts: " in screen.getvalue()


def test_hidden_display_draws_nothing():
    display = Display(10, False)   # a small module, and stderr is not a terminal here
    with display.stage("anything", total=3) as stage:
        stage.advance()
        stage.detail("x")
    assert stage.done == 1
