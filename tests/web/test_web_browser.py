"""End to end in headless Chromium (Playwright from PyPI driving Debian's chromium): sign
in with a token, upload a collection built from the starting kit's examples, check the
preflight, launch, watch the run finish live with its result stored, sign in as an
editor, accept, and see the collection ranked on the leaderboard.

The worker runs in a thread with the real snapshot and check stages; the training stage is
the scripted stand-in from conftest (the real pipeline trains a model: minutes, not
seconds)."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from posttrain_arena.service.app import create_app
from posttrain_arena.service.auth import SYSTEM, create_user
from posttrain_arena.service.challenges import create_challenge
from posttrain_arena.service.config import Settings
from posttrain_arena.service.db import Database
from posttrain_arena.service.stage_plan import FunctionStage, RunContext
from posttrain_arena.service.worker import Worker

from .conftest import CHALLENGE, fast_plan, pack

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = ("loan-amortization", "molar-masses")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Live:
    """The served app: its URL, tokens, a worker started on demand, and a gate that holds
    the training stage until the test opens it."""

    base: str
    tokens: dict[str, str]
    start_worker: Callable[[], None]
    gate: threading.Event
    db: Database


def _gated(stage: FunctionStage, gate: threading.Event) -> FunctionStage:
    def run(ctx: RunContext) -> dict[str, Any] | None:
        gate.wait(30)
        return stage(ctx)

    return FunctionStage(stage.name, run)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    """The app under uvicorn on loopback, and a worker thread once the test starts it."""
    import uvicorn

    settings = Settings(data_dir=tmp_path / "data", budget_cap=100.0, poll_interval_sec=0.2,
                        heartbeat_interval_sec=0.5)
    app = create_app(settings)
    db = app.state.db
    tokens = {}
    with db.write() as s:
        for name, role in (("ada", "participant"), ("eve", "editor")):
            tokens[name] = create_user(s, name, role)[1]
        create_challenge(s, SYSTEM, CHALLENGE)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    stop, gate = threading.Event(), threading.Event()
    plan = fast_plan(9.0)
    plan[-1] = _gated(plan[-1], gate)
    worker = threading.Thread(target=Worker(db, settings, plan).serve,
                              kwargs={"stop": stop}, daemon=True)
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield Live(f"http://127.0.0.1:{port}", tokens, worker.start, gate, db)
    stop.set()
    gate.set()
    server.should_exit = True
    if worker.is_alive():
        worker.join(timeout=10)
    serving.join(timeout=10)
    db.dispose()


def _archive(tmp_path: Path) -> Path:
    root = tmp_path / "kit-collection"
    (root / "envs").mkdir(parents=True)
    (root / "submission.yaml").write_text(
        "team_name: kit\ncontact_email: kit@example.org\ntrack: environments\n")
    for name in EXAMPLES:
        shutil.copytree(REPO / "starting-kit" / "examples" / name, root / "envs" / name)
    out = tmp_path / "kit-collection.tar.gz"
    out.write_bytes(pack(root))
    return out


@pytest.mark.browser
def test_submit_launch_watch_review_rank(live: Live, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, tokens = live.base, live.tokens
    archive = _archive(tmp_path)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(20_000)
        external: list[str] = []
        page.on("request", lambda r: external.append(r.url)
                if not r.url.startswith((base, "data:")) else None)

        def sign_in(token: str) -> None:
            page.goto(f"{base}/signin")
            page.fill("input[name=token]", token)
            page.click("form[action^='/signin'] button")

        sign_in(tokens["ada"])
        expect(page.locator(".flash")).to_contain_text("Signed in as ada")
        page.set_input_files("#upload-form input[type=file]", str(archive))
        page.fill("#upload-form input[name=name]", "kit examples")
        page.click("#upload-form button")
        expect(page.locator(".flash")).to_contain_text("2 eligible task(s)")
        expect(page.locator("#tasks")).to_contain_text("loan-amortization")

        page.click("#launch button")
        checks = page.locator("#preflight table")
        expect(checks).to_contain_text("challenge_open")
        expect(checks).not_to_contain_text("FAIL")
        page.screenshot(path=str(tmp_path / "preflight.png"), full_page=True)
        page.click("#launch-button")
        expect(page.locator(".flash")).to_contain_text("queued")
        state = page.locator("#live [data-field=state]")
        expect(state).to_have_text("queued")
        # The page polls the API: state and stage change in place while the run is active
        # (the training stand-in waits at its gate), and the page reloads once it ends.
        live.start_worker()
        expect(state).to_have_text("running")
        expect(page.locator("#live [data-field=stage]")).to_have_text("pipeline")
        expect(page.locator("#live [data-field=stages_done]")).to_have_text("snapshot, check")
        live.gate.set()
        expect(state).to_have_text("scored", timeout=30_000)
        expect(page.locator("#live")).to_contain_text("snapshot, check, pipeline")
        # every scored run's result is stored as it is scored: nothing to collect by hand
        expect(page.locator("#result-status")).to_have_text("pending")
        run_url = page.url
        page.screenshot(path=str(tmp_path / "run.png"), full_page=True)

        page.click("header form[action^='/signout'] button")
        sign_in(tokens["eve"])
        page.goto(run_url)
        page.check("#review input[value=accept]")
        page.fill("#review textarea[name=note]", "clean run")
        page.click("#review button")
        board = page.locator("#leaderboard table.leaderboard")
        expect(board).to_contain_text("kit examples")
        expect(board.locator("td.rank").first).to_have_text("1")
        expect(board).to_contain_text("+9.0 pp")
        expect(page.locator("#leaderboard svg circle.dot.ranked")).to_have_count(1)
        page.screenshot(path=str(tmp_path / "leaderboard.png"), full_page=True)
        page.goto(f"{base}/arena")
        expect(page.locator("#runs")).to_contain_text("scored")
        page.screenshot(path=str(tmp_path / "arena.png"), full_page=True)
        browser.close()
    assert not external, f"pages loaded non-local resources: {external}"
    assert (tmp_path / "leaderboard.png").stat().st_size > 0


#: Quota holders with long names, as organizers name teams and accounts.
LONG_NAMES = [f"participant-with-a-rather-long-account-name-{i:02d}" for i in range(8)]


@pytest.mark.browser
def test_the_budget_page_is_readable_at_1280_px(live: Live, tmp_path: Path) -> None:
    """An organizer's budget page with many quotas, and a participant's, at 1280 px: no
    sideways scrolling, no figure cut off, each quota's meter in view."""
    from playwright.sync_api import expect, sync_playwright

    from posttrain_arena.service.accounts import update_user
    from posttrain_arena.service.quotas import set_quota
    from posttrain_arena.service.schemas import UserUpdate

    with live.db.write() as s:
        for i, name in enumerate(LONG_NAMES):
            create_user(s, name, "participant")
            set_quota(s, SYSTEM, "user", name, 1_234_567.5 + i)
        update_user(s, SYSTEM, "ada", UserUpdate(team="a-team-with-a-long-name"))
        set_quota(s, SYSTEM, "user", "ada", 40.0)
        set_quota(s, SYSTEM, "team", "a-team-with-a-long-name", 60.0)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(20_000)

        def sign_in(token: str) -> None:
            page.context.clear_cookies()
            page.goto(f"{live.base}/signin")
            page.fill("input[name=token]", token)
            page.click("form[action^='/signin'] button")
            page.goto(f"{live.base}/arena/budget")

        def assert_readable() -> None:
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 1280, f"the page scrolls sideways: {width} px"
            cut = page.evaluate("""() => [...document.querySelectorAll(
                '#quotas-table td, #quotas-table th, dl.budget dd, dl.budget dt')]
                .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)""")
            assert not cut, f"cut off: {cut}"
            for box in page.locator("#quotas-table .meter").all():
                b = box.bounding_box()
                assert b is not None and b["width"] >= 60 and b["x"] + b["width"] <= 1280

        sign_in(live.tokens["eve"])  # an editor sees every quota
        rows = page.locator("#quotas-table tbody tr")
        expect(rows).to_have_count(len(LONG_NAMES) + 2)
        expect(page.locator("#quotas-table")).to_contain_text("1,234,567.50")
        assert_readable()
        page.screenshot(path=str(tmp_path / "budget-editor.png"), full_page=True)

        sign_in(live.tokens["ada"])  # a participant sees their own and their team's
        expect(rows).to_have_count(2)
        expect(page.locator("#quotas-table")).not_to_contain_text(LONG_NAMES[0])
        expect(page.locator("#you")).to_contain_text("a-team-with-a-long-name")
        assert_readable()
        page.screenshot(path=str(tmp_path / "budget-participant.png"), full_page=True)

        page.context.clear_cookies()  # anonymous: the global cap only
        page.goto(f"{live.base}/arena/budget")
        expect(page.locator("#quotas-table")).to_have_count(0)
        expect(page.locator("#global")).to_contain_text("100.00")
        assert_readable()
        browser.close()
