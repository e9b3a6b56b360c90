"""The leakage gate keeps copies of held-out tasks, their answers and their data out of
training, and keeps fresh instances of the same kind of task in."""

from __future__ import annotations

import shutil
from pathlib import Path

from posttrain_arena.task_format.package import load_task
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
LONG_SOLUTION = """#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv
rows = list(csv.DictReader(open("report.csv")))
north = [float(r["revenue"]) for r in rows if r["region"] == "north"]
with open("total.txt", "w") as fh:
    fh.write(f"{sum(north):.2f}\\n")
PY
"""


def _docs(paths: list[Path]) -> list:
    tasks = [load_task(p) for p in paths]
    return [doc_for_task(t.name, t.checksum, t.prompt, t.root) for t in tasks]


def _held(tmp_path: Path) -> list[Path]:
    held = make_word_task(tmp_path / "held" / "north-revenue", word="4521.50",
                          out="total.txt", prompt=HELD_PROMPT.format(out="total.txt"))
    (held / "environment" / "report.csv").write_text(
        "office,region,revenue\n" + "".join(f"o{i},{'north' if i % 3 else 'south'},{i * 97.5}\n"
                                            for i in range(12)))
    (held / "oracle" / "solve.sh").write_text(LONG_SOLUTION)
    other = make_word_task(tmp_path / "held" / "sort-names", word="ada",
                           prompt="Sort the names in people.txt and write them to out.txt.")
    return [held, other]


def test_exact_copy_under_another_name_is_excluded(tmp_path: Path) -> None:
    held = _held(tmp_path)
    exact = tmp_path / "train" / "totally-new-name"
    shutil.copytree(held[0], exact)
    (found,) = find_leaks(_docs([exact]), _docs(held))
    assert (found.reason, found.held_out_task, found.similarity) == (
        "exact-copy", "north-revenue", 1.0)


def test_reworded_copy_that_keeps_the_answer_is_excluded(tmp_path: Path) -> None:
    held = _held(tmp_path)
    # New name, reworded prompt, new numbers in the prompt: but the same solution, with
    # comments and blank lines added, so replaying it passes the held-out task.
    same_solution = make_word_task(tmp_path / "train" / "branch-sales", word="9313.25",
                                   out="sum.txt", prompt=NEAR_PROMPT.format(out="sum.txt"))
    (same_solution / "oracle" / "solve.sh").write_text(
        LONG_SOLUTION.replace("set -euo", "# computed by hand\n\nset  -euo"))
    # Unrelated prompt, own solution, but the held-out task's data under another name.
    same_data = make_word_task(tmp_path / "train" / "office-list", word="o1",
                               prompt="Write the first office of offices.csv to answer.txt.")
    shutil.copy(held[0] / "environment" / "report.csv", same_data / "environment" / "offices.csv")
    # One word of a long solution renamed: a near copy of the program.
    near_solution = make_word_task(tmp_path / "train" / "south", word="1.0",
                                   prompt="Give the south revenue in total.txt.")
    (near_solution / "oracle" / "solve.sh").write_text(LONG_SOLUTION.replace("north =", "n ="))
    found = {e.task: e for e in find_leaks(_docs([same_solution, same_data, near_solution]),
                                           _docs(held))}
    assert found["branch-sales"].reason == "same-solution"
    assert found["office-list"].reason == "same-environment"
    assert found["south"].reason == "near-duplicate"
    assert found["south"].detail.startswith("solution")
    assert 0.8 <= found["south"].similarity < 1.0
    assert {e.held_out_task for e in found.values()} == {"north-revenue"}


def test_nearly_verbatim_prompt_is_excluded_whatever_its_answer(tmp_path: Path) -> None:
    held = _held(tmp_path)
    copy = make_word_task(tmp_path / "train" / "copy", word="1", out="total.txt",
                          prompt=HELD_PROMPT.format(out="total.txt").replace("Compute",
                                                                              "Calculate"))
    (found,) = find_leaks(_docs([copy]), _docs(held))
    assert found.reason == "near-duplicate" and found.detail.startswith("prompt")


def test_fresh_instances_of_the_same_kind_of_task_are_kept(tmp_path: Path) -> None:
    held = _held(tmp_path)
    # The same kind of question about other numbers, with its own answer and no data:
    # a sibling instance (what a collection teaching the skill is made of), not a copy.
    sibling = make_word_task(tmp_path / "train" / "branch-sales", word="9313.25",
                             out="sum.txt", prompt=NEAR_PROMPT.format(out="sum.txt"))
    # Another ask with the same generic verifier.
    other = make_word_task(tmp_path / "train" / "b", word="y",
                           prompt="Count the lines of notes.txt that contain TODO and write "
                           "the count to out.txt.")
    assert find_leaks(_docs([sibling, other]), _docs(held)) == []


def test_numbers_tell_questions_apart(tmp_path: Path) -> None:
    held = [make_word_task(tmp_path / "held" / "seq", word="x",
                           prompt="Write the integers from 6 to 14, one per line, to numbers.txt.")]
    same = make_word_task(tmp_path / "train" / "a", word="y",
                          prompt="Write the integers from 6 to 14, one per line, to numbers.txt.")
    other = make_word_task(tmp_path / "train" / "b", word="z",
                           prompt="Write the integers from 2 to 9, one per line, to numbers.txt.")
    found = find_leaks(_docs([same, other]), _docs(held))
    assert [(e.task, e.reason) for e in found] == [("a", "near-duplicate")]
