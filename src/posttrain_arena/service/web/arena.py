"""Pages: `/arena` (challenges, budget, collections, runs, submit forms), `/arena/budget`
(the global cap, quotas and use), a challenge with its leaderboard and review queue, and
a collection with its tasks, findings and near-duplicate hold."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from posttrain_arena.evaluate.instrument import instrument_beside
from posttrain_arena.service import budget as budget_mod
from posttrain_arena.service import challenges as ch_svc
from posttrain_arena.service import collections as col_svc
from posttrain_arena.service import evidence as evidence_svc
from posttrain_arena.service import families
from posttrain_arena.service import runs as run_svc
from posttrain_arena.service.errors import ServiceError
from posttrain_arena.service.leaderboard import leaderboard
from posttrain_arena.service.models import Collection
from posttrain_arena.service.results import list_results
from posttrain_arena.service.schemas import (
    GitSource,
    Health,
    HealthUpdate,
    HfSource,
    PathSource,
)
from posttrain_arena.service.views import (
    collection_names,
    collection_origin,
    collection_tasks,
    user_names,
)
from posttrain_arena.service.web.page import (
    PageRoute,
    Viewer,
    db_of,
    get_viewer,
    redirect,
    render,
)
from posttrain_arena.service.web.svg import leaderboard_svg

router = APIRouter(route_class=PageRoute, include_in_schema=False)
ViewerDep = Annotated[Viewer, Depends(get_viewer)]


@router.get("/arena", response_class=HTMLResponse)
def arena_page(request: Request, viewer: ViewerDep) -> Response:
    """Challenges with health, budget, collections, recent runs, and the submit forms."""
    with db_of(request).read() as s:
        challenges = [ch_svc.to_out(c) for c in ch_svc.list_challenges(s)]
        budget = budget_mod.get_budget(s, viewer.principal)
        collections, n_collections = col_svc.list_collections(s, limit=100)
        runs, n_runs = run_svc.list_runs(s, limit=30)
        names = user_names(s, [c.owner_id for c in collections]
                           + [r.created_by for r in runs])
        col_names = collection_names(s, [r.collection_id for r in runs])
        held = families.held_families(s, viewer.principal) if viewer.is_editor else []
    by_id = {c.id: c for c in challenges}
    return render(request, "arena.html", viewer, challenges=challenges, budget=budget,
                  collections=collections, n_collections=n_collections, runs=runs,
                  n_runs=n_runs, names=names, challenges_by_id=by_id, col_names=col_names,
                  held=held)


@router.get("/arena/budget", response_class=HTMLResponse)
def budget_page(request: Request, viewer: ViewerDep) -> Response:
    """The global cap, the viewer's own use, and the quotas the viewer may see (every
    one for organizers, the viewer's own and their team's for a participant)."""
    with db_of(request).read() as s:
        budget = budget_mod.get_budget(s, viewer.principal)
    you = budget.you
    caps_you = [q for q in budget.quotas if you is not None and (
        (q.kind, q.name) in {("user", you.user), ("team", you.team)})]
    return render(request, "budget.html", viewer, budget=budget, caps_you=caps_you)


@router.get("/arena/challenges/{ref}", response_class=HTMLResponse)
def challenge_page(ref: str, request: Request, viewer: ViewerDep) -> Response:
    """A challenge: its pins, what it can detect (its protocol of controls), the
    leaderboard with its plot, results, and its runs."""
    with db_of(request).read() as s:
        row = ch_svc.get_challenge(s, ref)
        ch = ch_svc.to_out(row)
        instrument = instrument_beside(row.suite_path, row.suite_hash)
        board = leaderboard(s, ch.slug)
        results = list_results(s, ch.id, limit=100)
        runs, n_runs = run_svc.list_runs(s, challenge=ch.slug, limit=30)
        names = user_names(s, [r.created_by for r in runs])
        col_names = collection_names(s, [r.collection_id for r in runs]
                                     + [r.collection_id for r in results])
    return render(request, "challenge.html", viewer, ch=ch, board=board,
                  instrument=instrument,
                  plot=leaderboard_svg(board), results=results, runs=runs, n_runs=n_runs,
                  col_names=col_names, challenges_by_id={ch.id: ch}, names=names)


@router.post("/arena/challenges/{ref}/health")
def challenge_health(ref: str, request: Request, viewer: ViewerDep,
                     health: Annotated[str, Form()] = "",
                     reason: Annotated[str, Form()] = "") -> Response:
    """Open or pause a challenge (admins)."""
    back = f"/arena/challenges/{ref}"
    try:
        update = HealthUpdate(health=Health(health), reason=reason.strip() or None)
        with db_of(request).write() as s:
            ch_svc.set_health(s, viewer.principal, ref, update)
    except ValueError:
        return redirect(back, "Choose open or paused.", "error")
    except ServiceError as exc:
        if exc.status_code == 404:
            raise
        return redirect(back, exc.message, "error")
    return redirect(back, f"The challenge is now {health}.")


@router.get("/arena/collections/{collection_id}", response_class=HTMLResponse)
def collection_page(collection_id: int, request: Request, viewer: ViewerDep,
                    sort: str = "task") -> Response:
    """A collection: source, pins, tasks (names and domains), gate evidence (sortable),
    findings, runs, launch form."""
    with db_of(request).read() as s:
        col = col_svc.get_collection(s, collection_id)
        evidence = evidence_svc.list_evidence(s, collection_id, sort)
        runs, n_runs = run_svc.list_runs(s, collection_id=collection_id, limit=50)
        challenges = [ch_svc.to_out(c) for c in ch_svc.list_challenges(s)]
        names = user_names(s, [col.owner_id] + [r.created_by for r in runs])
        # the owner and editors see whether it is held and what it matched (by id; the
        # matched collection's name and owner for editors only); nobody else sees any
        dup = (families.duplicate_view(s, col)
               if families.may_see_duplicate(viewer.principal, col) else None)
        matched = (s.get(Collection, dup.near_duplicate_of)
                   if dup is not None and viewer.is_editor else None)
        if matched is not None:
            names.update(user_names(s, [matched.owner_id]))
    tasks = collection_tasks(col)
    origin = collection_origin(col, request.app.state.settings.hf_endpoint)
    return render(request, "collection.html", viewer, col=col, tasks=tasks, runs=runs,
                  origin=origin, n_runs=n_runs, evidence=evidence, sort=sort,
                  challenges=challenges, names=names, dup=dup, matched=matched,
                  challenges_by_id={c.id: c for c in challenges},
                  col_names={col.id: col.name})


@router.post("/arena/collections/{collection_id}/clear-duplicate")
def clear_duplicate(collection_id: int, request: Request, viewer: ViewerDep) -> Response:
    """Let a held near-duplicate's family launch as a family of its own (editors)."""
    back = f"/arena/collections/{collection_id}"
    try:
        with db_of(request).write() as s:
            first = families.clear_duplicate(s, viewer.principal, collection_id)
            first_id = first.id
    except ServiceError as exc:
        if exc.status_code == 404:
            raise
        return redirect(back, exc.message, "error")
    return redirect(back, f"Cleared: family {first_id} may launch, with limits of its own.")


@router.get("/arena/collections/{collection_id}/tasks/{task}", response_class=HTMLResponse)
def task_page(collection_id: int, task: str, request: Request, viewer: ViewerDep) -> Response:
    """One task's gate evidence: verdict, every gate, every trial."""
    with db_of(request).read() as s:
        col = col_svc.get_collection(s, collection_id)
        row = evidence_svc.get_evidence(s, collection_id, task)
    return render(request, "task_evidence.html", viewer, col=col, row=row)


def _registered(col_id: int, name: str, eligible: int, errors: int, warnings: int
                ) -> Response:
    msg = (f"Collection {name!r} registered: {eligible} eligible task(s), {errors} error(s), "
           f"{warnings} warning(s).")
    return redirect(f"/arena/collections/{col_id}", msg, "info" if eligible else "error")


@router.post("/arena/collections/upload")
async def submit_upload(request: Request, viewer: ViewerDep) -> Response:
    """Register a collection from an uploaded tar.gz or zip archive (multipart form). The
    CSRF token, the viewer and the size bound were checked before the body was read."""
    settings, db = request.app.state.settings, db_of(request)
    form = await request.form()
    file = form.get("file")
    if not isinstance(file, UploadFile) or not file.filename:
        return redirect("/arena#submit", "Choose an archive file (.tar.gz or .zip) to upload.",
                        "error")
    try:
        staged = await run_in_threadpool(col_svc.stage_archive, settings, viewer.principal,
                                         file.file, file.filename,
                                         (_text(form.get("name")) or "").strip() or None)
        col = await run_in_threadpool(col_svc.register, db, settings, viewer.principal, staged)
    except ServiceError as exc:
        return redirect("/arena#submit", f"The upload was not registered: {exc.message}",
                        "error")
    return _registered(col.id, col.name, col.eligible_count, col.error_count,
                       col.warning_count)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


@router.post("/arena/collections/git")
def submit_git(request: Request, viewer: ViewerDep, url: Annotated[str, Form()] = "",
               ref: Annotated[str, Form()] = "", name: Annotated[str, Form()] = "") -> Response:
    """Register a collection from a git URL and ref (pinned to the resolved commit)."""
    settings, db = request.app.state.settings, db_of(request)
    if not url.strip():
        return redirect("/arena#submit", "Give the git URL of the collection.", "error")
    try:
        src = GitSource(url=url.strip(), ref=ref.strip() or "HEAD", name=name.strip() or None)
        col = col_svc.register(db, settings, viewer.principal,
                               col_svc.stage_git(settings, viewer.principal, src))
    except ValidationError as exc:
        return redirect("/arena#submit", f"Bad git source: {exc.errors()[0]['msg']}", "error")
    except ServiceError as exc:
        return redirect("/arena#submit", f"The repository was not registered: {exc.message}",
                        "error")
    return _registered(col.id, col.name, col.eligible_count, col.error_count,
                       col.warning_count)


@router.post("/arena/collections/hf")
def submit_hf(request: Request, viewer: ViewerDep, url: Annotated[str, Form()] = "",
              name: Annotated[str, Form()] = "") -> Response:
    """Register a collection from a public Hugging Face dataset (pinned to a commit)."""
    settings, db = request.app.state.settings, db_of(request)
    if not url.strip():
        return redirect("/arena#submit", "Give the hf://datasets/ORG/NAME@REVISION URL.",
                        "error")
    try:
        src = HfSource(url=url.strip(), name=name.strip() or None)
        col = col_svc.register(db, settings, viewer.principal,
                               col_svc.stage_hf(settings, viewer.principal, src))
    except ServiceError as exc:
        return redirect("/arena#submit", f"The dataset was not registered: {exc.message}",
                        "error")
    return _registered(col.id, col.name, col.eligible_count, col.error_count,
                       col.warning_count)


@router.post("/arena/collections/path")
def submit_path(request: Request, viewer: ViewerDep, path: Annotated[str, Form()] = "",
                name: Annotated[str, Form()] = ""
                ) -> Response:
    """Register a collection from a folder on the server (editors, or allowed roots)."""
    settings, db = request.app.state.settings, db_of(request)
    if not path.strip():
        return redirect("/arena#submit", "Give the server path of the collection.", "error")
    try:
        src = PathSource(path=path.strip(), name=name.strip() or None)
        col = col_svc.register(db, settings, viewer.principal,
                               col_svc.stage_path(settings, viewer.principal, src))
    except ServiceError as exc:
        return redirect("/arena#submit", f"The folder was not registered: {exc.message}",
                        "error")
    return _registered(col.id, col.name, col.eligible_count, col.error_count,
                       col.warning_count)
