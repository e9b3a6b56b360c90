"""Send what libraries print during a run to the run's log file, not the terminal.

Trainer step logs (transformers' printer callback writes them to stdout), progress bars
and Python warnings (stderr), and the `logging` output of transformers, TRL, PEFT,
accelerate and datasets all go to one file; the caller keeps its own handle on the
terminal (take it before entering) for the stages and progress bars it shows.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

LIBRARY_LOGGERS = ("transformers", "trl", "peft", "accelerate", "datasets", "torch")


@contextlib.contextmanager
def library_output_to(log_path: Path) -> Iterator[Path]:
    """Within the block, stdout, stderr, Python warnings and library loggers write to
    `log_path` (appended); all restored on exit."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    saved: list[tuple[logging.Logger, list[logging.Handler], bool]] = []
    with log_path.open("a", encoding="utf-8", buffering=1) as fh:
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        for name in LIBRARY_LOGGERS:
            logger = logging.getLogger(name)
            saved.append((logger, list(logger.handlers), logger.propagate))
            for h in list(logger.handlers):
                logger.removeHandler(h)
            logger.addHandler(handler)
            logger.propagate = False
        try:
            with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh), \
                    warnings.catch_warnings():
                warnings.showwarning = _warning_writer(fh)
                yield log_path
        finally:
            for logger, handlers, propagate in saved:
                logger.removeHandler(handler)
                for h in handlers:
                    logger.addHandler(h)
                logger.propagate = propagate
            sys.stdout.flush()


def _warning_writer(fh: TextIO) -> Any:
    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        fh.write(warnings.formatwarning(message, category, filename, lineno, line))

    return show
