"""Pages: launch a run (preflight shown first), a run's live state, cancel, collect, review."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, Response

from posttrain_arena.service import budget as budget_mod
from posttrain_arena.service import challenges as ch_svc
from posttrain_arena.service import collections as col_svc
from posttrain_arena.service import evidence as evidence_svc
from posttrain_arena.service import results as res_svc
from posttrain_arena.service import runs as run_svc
from posttrain_arena.service.errors import NotFound, ServiceError
from posttrain_arena.service.reasons import public_text
from posttrain_arena.service.schemas import ACTIVE_STATES, Decision, ReviewIn, RunRequest
from posttrain_arena.service.views import user_names
from posttrain_arena.service.web.page import (
    PageRoute,
    Viewer,
    db_of,
    get_viewer,
    redirect,
    render,
)

router = APIRouter(route_class=PageRoute, include_in_schema=False)
ViewerDep = Annotated[Viewer, Depends(get_viewer)]


@router.get("/arena/collections/{collection_id}/launch", response_class=HTMLResponse)
def launch_page(collection_id: int, request: Request, viewer: ViewerDep,
                challenge: str = "") -> Response:
    """The preflight checks (ok / FAIL / skip with reasons) and, when they pass, Launch."""
    if not viewer.signed_in:
        return redirect(f"/signin?next=/arena/collections/{collection_id}",
                        "Sign in to launch a run.", "error")
    with db_of(request).read() as s:
        col = col_svc.get_collection(s, collection_id)
        challenges = [ch_svc.to_out(c) for c in ch_svc.list_challenges(s)]
        if not challenge and challenges:
            challenge = challenges[0].slug
        ch = ch_svc.to_out(ch_svc.get_challenge(s, challenge))
        pre = run_svc.preflight(s, viewer.principal,
                                RunRequest(challenge=ch.slug, collection_id=col.id),
                                request.app.state.settings)
        budget = budget_mod.get_budget(s, viewer.principal)
    return render(request, "launch.html", viewer, col=col, ch=ch, challenges=challenges,
                  pre=pre, budget=budget, request_id=uuid.uuid4().hex)


@router.post("/arena/runs")
def launch(request: Request, viewer: ViewerDep, challenge: Annotated[str, Form()],
           collection_id: Annotated[int, Form()],
           request_id: Annotated[str, Form()] = "") -> Response:
    """Launch the run (idempotent on the form's request id) and go to its page."""
    req = RunRequest(challenge=challenge, collection_id=collection_id,
                     request_id=request_id[:100] or None)
    try:
        with db_of(request).write() as s:
            run, created = run_svc.launch(s, viewer.principal, req,
                                          request.app.state.settings)
            run_id = run.id
    except NotFound:
        raise
    except ServiceError as exc:
        return redirect(f"/arena/collections/{collection_id}/launch?challenge={challenge}",
                        f"The run was not launched: {exc.message}", "error")
    msg = (f"Run {run_id} queued; a worker will pick it up." if created
           else f"This form was already submitted: run {run_id}.")
    return redirect(f"/arena/runs/{run_id}", msg)


@router.get("/arena/runs/{run_id}", response_class=HTMLResponse)
def run_page(run_id: int, request: Request, viewer: ViewerDep) -> Response:
    """A run: live state and stage, reason, score, result and review."""
    with db_of(request).read() as s:
        run = run_svc.get_run(s, run_id)
        col = col_svc.get_collection(s, run.collection_id)
        ch = ch_svc.to_out(ch_svc.get_challenge(s, run.challenge_id))
        try:
            result = res_svc.result_out(*res_svc.result_for_run(s, run_id))
        except NotFound:
            result = None
        names = user_names(s, [run.created_by, col.owner_id])
        evidence = evidence_svc.list_evidence(s, run.collection_id, "eligible")
    return render(request, "run.html", viewer, run=run, col=col, ch=ch, result=result,
                  reason=public_text(run.reason_class),
                  evidence=evidence,
                  names=names, active=run.state in ACTIVE_STATES,
                  may_manage=viewer.may_manage(col.owner_id))


def _back(run_id: int, message: str, kind: str = "info") -> Response:
    return redirect(f"/arena/runs/{run_id}", message, kind)


@router.post("/arena/runs/{run_id}/cancel")
def cancel(run_id: int, request: Request, viewer: ViewerDep) -> Response:
    """Cancel a queued or running run (its author or an editor)."""
    try:
        with db_of(request).write() as s:
            run_svc.cancel(s, viewer.principal, run_id)
    except NotFound:
        raise
    except ServiceError as exc:
        return _back(run_id, f"Not canceled: {exc.message}", "error")
    return _back(run_id, "Run canceled; its reservation was released.")


@router.post("/arena/runs/{run_id}/collect")
def collect(run_id: int, request: Request, viewer: ViewerDep) -> Response:
    """Store the scored run's result for review (its author or an editor)."""
    try:
        with db_of(request).write() as s:
            res_svc.collect(s, viewer.principal, run_id)
    except NotFound:
        raise
    except ServiceError as exc:
        return _back(run_id, f"Not collected: {exc.message}", "error")
    return _back(run_id, "Result collected; it waits for an editor's review.")


@router.post("/arena/runs/{run_id}/review")
def review(run_id: int, request: Request, viewer: ViewerDep,
           decision: Annotated[str, Form()] = "", note: Annotated[str, Form()] = "") -> Response:
    """Accept or reject the run's result, with a note (editors)."""
    try:
        body = ReviewIn(decision=Decision(decision), note=note.strip())
    except ValueError:
        return _back(run_id, "Choose accept or reject (a note is at most 5000 characters).",
                     "error")
    try:
        with db_of(request).write() as s:
            res_svc.review(s, viewer.principal, run_id, body)
            slug = ch_svc.get_challenge(s, run_svc.get_run(s, run_id).challenge_id).slug
    except NotFound:
        raise
    except ServiceError as exc:
        return _back(run_id, f"Not reviewed: {exc.message}", "error")
    return redirect(f"/arena/challenges/{slug}#leaderboard",
                    f"Run {run_id}'s result {body.decision.value}ed.")
