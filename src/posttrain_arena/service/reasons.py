"""Why a run failed, was canceled or requeued: a fixed set of classes with public text.

A run's reason is published to everyone who can read runs (anonymous readers, cached
lists, the web pages). The text of an exception raised while a run was working names
whatever that code touched: held-out task names while the sealed suite loads or is
paired, server paths, hosts. So what is published is only the class, and its text is
written here, once; the full message is stored beside it (`Run.detail`) and shown only
to editors (`GET /api/runs/{id}/failure`). No public answer is built from the detail,
so no new kind of failure can leak through it.
"""

from __future__ import annotations

from enum import StrEnum


class RunReason(StrEnum):
    """The class of a run's reason: what happened, at the boundary where it happened."""

    CANCELED = "canceled"
    COLLECTION = "collection"
    SCORE_INCOMPLETE = "score_incomplete"
    NO_SCORE = "no_score"
    TIMED_OUT = "timed_out"
    WORKER_LOST = "worker_lost"
    REQUEUED = "requeued"
    INTERNAL = "internal"


PUBLIC_TEXT: dict[RunReason, str] = {
    RunReason.CANCELED: "canceled by its author or an editor",
    RunReason.COLLECTION: "the collection failed its checks when the run took its snapshot "
    "(run `arena validate DIR` and register it again)",
    RunReason.SCORE_INCOMPLETE: "the score does not cover the whole held-out suite, so it "
    "cannot count",
    RunReason.NO_SCORE: "every stage finished but none produced a score",
    RunReason.TIMED_OUT: "the run took longer than the challenge allows",
    RunReason.WORKER_LOST: "the worker running it was lost too many times",
    RunReason.REQUEUED: "the worker running it was lost; it was requeued to resume after "
    "its last finished stage",
    RunReason.INTERNAL: "the run failed on the organizers' side; an editor can see why",
}
"""The only reason text anyone but an editor sees, one line per class."""


def public_text(reason_class: str | None) -> str | None:
    """The published text of a stored reason class (None for none; an unknown class
    reads as an internal failure, never as its stored detail)."""
    if reason_class is None:
        return None
    try:
        return PUBLIC_TEXT[RunReason(reason_class)]
    except ValueError:
        return PUBLIC_TEXT[RunReason.INTERNAL]
