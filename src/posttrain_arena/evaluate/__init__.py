"""Evaluation: suites, many trials with bounded concurrency, pass rates, paired statistics."""

from posttrain_arena.evaluate.report import EvalReport
from posttrain_arena.evaluate.stats import Comparison, SuiteMismatch, compare
from posttrain_arena.evaluate.suite import Suite, SuiteError, load_suite, suite_from_tasks

__all__ = [
    "Comparison",
    "EvalReport",
    "Suite",
    "SuiteError",
    "SuiteMismatch",
    "compare",
    "load_suite",
    "suite_from_tasks",
]
