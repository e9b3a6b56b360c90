"""Library chatter during a run goes to the run's log file, not the terminal."""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path

from posttrain_arena.train.runlog import library_output_to


def test_prints_warnings_and_library_logs_land_in_the_file(tmp_path: Path, capsys) -> None:
    log = tmp_path / "run" / "run.log"
    logger = logging.getLogger("transformers.trainer")
    before = list(logging.getLogger("transformers").handlers)
    with library_output_to(log):
        print("{'loss': 0.5, 'epoch': 1.0}")
        sys.stderr.write("Loading weights: 100%\n")
        warnings.warn("a library deprecation", FutureWarning, stacklevel=1)
        logger.warning("a trainer warning")
    out, err = capsys.readouterr()
    assert out == "" and err == ""
    text = log.read_text()
    for line in ("'loss': 0.5", "Loading weights", "a library deprecation",
                 "a trainer warning"):
        assert line in text
    assert logging.getLogger("transformers").handlers == before  # restored
    print("after")
    assert capsys.readouterr().out == "after\n"
