"""The leakage gate keeps copies and near-copies of held-out tasks out of training."""

from __future__ import annotations

import shutil
from pathlib import Path

from posttrain_arena.spec.package import load_task
from posttrain_arena.train.leakage import doc_for_task, find_leaks

from .taskkit import make_word_task

HELD_PROMPT = (
    "The quarterly report in report.csv lists 12 regional offices. Compute the total "
    "revenue of the offices in the north region, round it to 2 decimals, and write the "
    "number to the file {out} in the working directory. Do not modify report.csv."
)
NEAR_PROMPT = (
    "The quarterly report in report.csv lists 17 regional offices. Calculate the total "
    "revenue of the offices in the north region, round it to 3 decimals, and write the "
    "number to the file {out} in the working directory. Do not modify report.csv!"
)


def _docs(paths: list[Path]) -> list:
    tasks = [load_task(p) for p in paths]
    return [doc_for_task(t.name, t.checksum, t.prompt, t.root) for t in tasks]


def test_gate_catches_exact_and_renamed_reworded_copies(tmp_path: Path) -> None:
    held = make_word_task(tmp_path / "held" / "north-revenue", word="4521.50",
                          out="total.txt", prompt=HELD_PROMPT.format(out="total.txt"))
    other_held = make_word_task(tmp_path / "held" / "sort-names", word="ada",
                                prompt="Sort the names in people.txt and write them to out.txt.")
    exact = tmp_path / "train" / "totally-new-name"
    shutil.copytree(held, exact)
    # Renamed task and output file, reworded prompt, different numbers.
    near = make_word_task(tmp_path / "train" / "branch-sales", word="9313.25",
                          out="sum.txt", prompt=NEAR_PROMPT.format(out="sum.txt"))
    unrelated = make_word_task(tmp_path / "train" / "greet", word="hello",
                               prompt="Print a friendly greeting for the new colleague into "
                               "greeting.txt, one line, no trailing spaces.")
    found = find_leaks(_docs([exact, near, unrelated]), _docs([held, other_held]))
    by_task = {e.task: e for e in found}
    assert set(by_task) == {"totally-new-name", "branch-sales"}
    assert by_task["totally-new-name"].reason == "exact-copy"
    assert by_task["totally-new-name"].held_out_task == "north-revenue"
    assert by_task["branch-sales"].reason == "near-duplicate"
    assert by_task["branch-sales"].held_out_task == "north-revenue"
    assert 0.8 <= by_task["branch-sales"].similarity < 1.0
    assert "north-revenue" in by_task["branch-sales"].detail


def test_same_generic_verifier_different_asks_are_kept(tmp_path: Path) -> None:
    # Family instances share one verifier but ask for different things: not leakage.
    held = make_word_task(tmp_path / "held" / "a", word="x",
                          prompt="Count the lines of notes.txt that contain TODO and write "
                          "the count to out.txt.")
    train = make_word_task(tmp_path / "train" / "b", word="y",
                           prompt="Sort the names in people.txt alphabetically and write "
                           "them to sorted.txt.")
    assert find_leaks(_docs([train]), _docs([held])) == []
