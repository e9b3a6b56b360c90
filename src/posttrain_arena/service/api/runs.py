"""Run routes: preflight, launch, list, cancel, collect, result, review."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request, Response

from posttrain_arena.service import results as results_svc
from posttrain_arena.service import runs as svc
from posttrain_arena.service.api.deps import DbDep, PrincipalDep, SettingsDep
from posttrain_arena.service.db import Database
from posttrain_arena.service.fastreads import KnownReads
from posttrain_arena.service.models import Run
from posttrain_arena.service.schemas import (
    Preflight,
    ResultOut,
    ReviewIn,
    RunFailure,
    RunList,
    RunOut,
    RunRequest,
    RunState,
)

router = APIRouter(prefix="/api/runs", tags=["runs"])


def _run_json(run: Run) -> bytes:
    return RunOut.model_validate(run).model_dump_json().encode()


def _runs_json(db: Database, ids: frozenset[int]) -> dict[int, bytes]:
    """The runs `ids` as the run list shows them now (those that exist), for cached pages
    whose only change is in these runs (readcache.get_runs)."""
    with db.read() as s:
        return {r.id: _run_json(r) for r in svc.runs_by_id(s, ids)}


@router.post("/preflight", response_model=Preflight)
def preflight(body: RunRequest, principal: PrincipalDep, db: DbDep,
              settings: SettingsDep) -> Preflight:
    """Every launch check as ok, FAIL or skip with its reason; reserves nothing."""
    with db.read() as s:
        return svc.preflight(s, principal, body, settings)


@router.post("", response_model=RunOut, status_code=201,
             responses={200: {"description": "A retry with the same request_id"}})
def launch(body: RunRequest, principal: PrincipalDep, db: DbDep, settings: SettingsDep,
           response: Response) -> Run:
    """Queue a run and reserve its allowance; a retry with the same request_id returns the
    same run (200). 409 lists the failed checks."""
    with db.write() as s:
        run, created = svc.launch(s, principal, body, settings)
    if not created:
        response.status_code = 200
    return run


@router.get("", response_model=RunList)
async def list_runs(
    request: Request, challenge: str | None = None, collection_id: int | None = None,
    state: RunState | None = None,
    limit: int = Query(50, ge=1, description="Page size (at most 500)"),
    offset: int = Query(0, ge=0, description="Runs to skip, newest first"),
) -> Response:
    """Runs, newest first."""
    db: Database = request.app.state.db
    limit = min(limit, 500)
    cache = request.app.state.read_cache
    where = ("runs", challenge, collection_id, state)
    # a page depends on which runs match and on its own runs' rows; the count only on
    # which runs match, so every page of one filter shares it
    members = ("challenges", "run_members")

    def page() -> list[tuple[int, bytes]]:
        with db.read() as s:
            rows = svc.page_of_runs(s, challenge, collection_id, state, limit, offset)
            return [(r.id, _run_json(r)) for r in rows]

    def count() -> bytes:
        with db.read() as s:
            return str(svc.count_runs(s, challenge, collection_id, state)).encode()

    async def answer() -> bytes:
        counters = await cache.versions()  # one read of the counters for both parts
        items = await cache.get_runs((*where, limit, offset), members, page,
                                     lambda ids: _runs_json(db, ids), counters)
        total = await cache.get((*where, "count"), members, count, counters)
        return b'{"items":' + items + b',"total":' + total + b"}"  # RunList, from two parts

    # the same for every caller: later anonymous reads of this address skip the framework
    known: KnownReads = request.app.state.known_reads
    return await known.serve(request, answer)


@router.get("/{run_id}", response_model=RunOut)
def get(run_id: int, db: DbDep) -> Run:
    """One run: state, stage, reason."""
    with db.read() as s:
        return svc.get_run(s, run_id)


@router.get("/{run_id}/failure", response_model=RunFailure)
def failure(run_id: int, principal: PrincipalDep, db: DbDep) -> RunFailure:
    """The run's reason in full, the message behind its public class (editors)."""
    with db.read() as s:
        return svc.failure(s, principal, run_id)


@router.post("/{run_id}/cancel", response_model=RunOut)
def cancel(run_id: int, principal: PrincipalDep, db: DbDep) -> Run:
    """Cancel a queued or running run (its author or an editor)."""
    with db.write() as s:
        return svc.cancel(s, principal, run_id)


@router.post("/{run_id}/collect", response_model=ResultOut, status_code=201,
             responses={200: {"description": "Already collected"}})
def collect(run_id: int, principal: PrincipalDep, db: DbDep, response: Response) -> ResultOut:
    """Check suite coverage and store the run's pending result."""
    with db.write() as s:
        result, created = results_svc.collect(s, principal, run_id)
        _, review = results_svc.result_for_run(s, run_id)
        out = results_svc.result_out(result, review)
    if not created:
        response.status_code = 200
    return out


@router.get("/{run_id}/result", response_model=ResultOut)
def result(run_id: int, db: DbDep) -> ResultOut:
    """The run's collected result and review status."""
    with db.read() as s:
        return results_svc.result_out(*results_svc.result_for_run(s, run_id))


@router.post("/{run_id}/review", response_model=ResultOut)
def review(run_id: int, body: ReviewIn, principal: PrincipalDep, db: DbDep) -> ResultOut:
    """Accept or reject the run's result with a note (editors)."""
    with db.write() as s:
        results_svc.review(s, principal, run_id, body)
        return results_svc.result_out(*results_svc.result_for_run(s, run_id))
