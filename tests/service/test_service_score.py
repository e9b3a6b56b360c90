"""Reading the pipeline's score.json into the stored aggregate (no per-task data)."""

from __future__ import annotations

from posttrain_arena.evaluate.stats import DomainChange, TaskChange
from posttrain_arena.service.results import summarize_score
from posttrain_arena.train.score import Change, PassRates, Score


def test_pipeline_score_is_summarized_without_task_names() -> None:
    rates = {"software-engineering": 0.5}
    score = Score(
        status="scored", run_dir="/tmp/x",
        base=PassRates(pass_rate=0.25, tasks=8, samples_per_task=1, infra_failures=0,
                       per_domain=rates),
        final=PassRates(pass_rate=0.5, tasks=8, samples_per_task=1, infra_failures=0,
                        per_domain=rates),
        change=Change(delta_pp=25.0, ci95_low_pp=10.0, ci95_high_pp=40.0, p_value=0.03,
                      test="sign", paired_tasks=8),
        per_domain=[DomainChange(domain="software-engineering", tasks=8, before=0.25,
                                 after=0.5, change_pp=25.0)],
        regressed_tasks=[TaskChange.model_construct(task="sealed-task-7")],
    )
    summary = summarize_score(score.model_dump(mode="json"))
    assert (summary.base_pass_rate, summary.final_pass_rate) == (0.25, 0.5)
    assert (summary.change_pp, summary.ci_low, summary.ci_high) == (25.0, 10.0, 40.0)
    assert summary.n_tasks == 8
    assert summary.per_domain["software-engineering"]["change_pp"] == 25.0
    assert "sealed-task-7" not in summary.model_dump_json()
