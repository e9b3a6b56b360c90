"""The forms: sign-in/out, CSRF, board posting with its rate limit, the three ways to
submit a collection, launch with preflight and request id, collect, review, cancel."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.service.gitserver import GitHttpServer, commit_all

from posttrain_arena.service.models import Result, Review, Run

from .conftest import Site, csrf_of, pack, post, signin, with_csrf


def run_id_of(resp: object) -> int:
    return int(str(resp.url).rsplit("/", 1)[-1])  # type: ignore[attr-defined]


def test_sign_in_and_out(site: Site) -> None:
    c = site.client()
    bad = signin(c, "arena_nope_nope")
    assert "Sign-in failed" in bad.text and "arena_session" not in c.cookies
    good = signin(c, site.tokens["editor"])
    assert str(good.url).endswith("/arena") and "Signed in as editor (editor)" in good.text
    cookie = next(ck for ck in c.cookies.jar if ck.name == "arena_session")
    assert cookie.has_nonstandard_attr("HttpOnly") and cookie.expires is not None
    assert site.tokens["editor"] not in str(cookie.value)  # a session, not the token
    copied = TestClient(site.app)  # a copy of the cookie, taken before signing out
    copied.cookies.set("arena_session", str(cookie.value))
    assert "editor <span" in copied.get("/").text
    out = post(c, "/signout")
    assert "Signed out." in out.text and "arena_session" not in c.cookies
    assert "editor <span" not in c.get("/").text
    assert "editor <span" not in copied.get("/").text  # revoked on the server too


@pytest.mark.parametrize("target", [
    "//evil.example/x", "/\\evil.example", "/\\/evil.example", "https://evil.example/",
    "javascript:alert(1)", "/\t/evil.example", "/%0a/x\n", "evil.example", "",
    "/\x7f/evil.example",
])
def test_signin_refuses_foreign_redirect_targets(site: Site, target: str) -> None:
    c = site.client()
    page = c.get("/signin", params={"next": target})
    assert 'name="next" value="/arena"' in page.text, page.text
    resp = c.post(with_csrf(c, "/signin"), data={"token": site.tokens["author"],
                                                 "next": target}, follow_redirects=False)
    assert resp.status_code == 303 and resp.headers["location"] == "/arena"


def test_signin_keeps_a_same_site_target(site: Site) -> None:
    c = site.client()
    resp = c.post(with_csrf(c, "/signin"), data={"token": site.tokens["author"],
                                                 "next": "/arena#submit"},
                  follow_redirects=False)
    assert resp.headers["location"] == "/arena#submit"
    failed = c.post(with_csrf(c, "/signin"), data={"token": "bad", "next": "/board/1?a=b&c"},
                    follow_redirects=False)
    assert failed.headers["location"] == "/signin?next=%2Fboard%2F1%3Fa%3Db%26c"


def test_forms_without_the_csrf_token_are_refused(site: Site) -> None:
    c = site.client("author")
    csrf_of(c)
    for url, data in (("/board/threads", {"title": "t", "body": "b"}),
                      ("/signin", {"token": site.tokens["admin"]}),
                      ("/signout", {})):
        for query in ("", "?csrf=", "?csrf=forged"):
            resp = c.post(url + query, data=data)
            assert resp.status_code == 400, url
            assert "reload the page" in resp.text
        # the token in the body, where a page on another site can put it, is not enough
        resp = c.post(url, data={**data, "csrf": c.cookies["arena_csrf"]})
        assert resp.status_code == 400, url
    assert "No threads yet." in site.client().get("/").text  # nothing was posted


def test_board_posting_and_rate_limit(site: Site) -> None:
    anon = site.client()
    refused = anon.post(with_csrf(anon, "/board/threads"), data={"title": "x", "body": "y"})
    assert refused.status_code == 401 and "sign in" in refused.text
    assert "Sign in" in anon.get("/").text and "x</a>" not in anon.get("/").text
    c = site.client("author")
    first = post(c, "/board/threads", {"title": "Leakage question", "body": "How strict?"})
    assert "Thread posted." in first.text and "How strict?" in first.text
    thread_url = str(first.url)
    reply = post(c, thread_url.replace("http://testserver", "") + "/messages",
                 {"body": "It compares prompts."})
    assert "Reply posted." in reply.text and "It compares prompts." in reply.text
    empty = post(c, "/board/threads", {"title": "", "body": "no title"})
    assert empty.status_code == 400 and "The thread was not posted" in empty.text
    assert ">no title</textarea>" in empty.text  # what was typed is still there
    # the limit is 3 posts per window: two were posted, the third fits, the fourth not
    post(c, "/board/threads", {"title": "third", "body": "ok"})
    typed = "A long <careful> message\nthat took a while to write"
    limited = post(c, "/board/threads", {"title": "fourth & last", "body": typed})
    assert limited.status_code == 429
    assert "flash error" in limited.text and "at most 3 posts per 60s" in limited.text
    assert 'value="fourth &amp; last"' in limited.text
    assert ">A long &lt;careful&gt; message\nthat took a while to write</textarea>" in (
        limited.text)
    again = post(c, thread_url.replace("http://testserver", "") + "/messages",
                 {"body": "a reply kept"})
    assert again.status_code == 429 and ">a reply kept</textarea>" in again.text
    board = site.client().get("/").text
    assert "Leakage question" in board and "fourth" not in board
    # the page's error and draft come only from a failed post, never from the URL
    forged = site.client().get("/", params={"error": "Visit evil.example", "status_code": 500})
    assert forged.status_code == 200 and "evil.example" not in forged.text


def test_submit_archive(site: Site, new_collection: Callable[..., Path]) -> None:
    c = site.client("author")
    resp = post(c, "/arena/collections/upload", {"name": "beta"},
                files={"file": ("beta.tar.gz", pack(new_collection(3, "beta")),
                                "application/gzip")})
    assert "/arena/collections/" in str(resp.url)
    assert "registered: 3 eligible task(s)" in resp.text and "task-beta-2" in resp.text
    bad = post(c, "/arena/collections/upload", {},
               files={"file": ("junk.tar.gz", b"not an archive", "application/gzip")})
    assert str(bad.url).endswith("/arena#submit") and "The upload was not registered" in bad.text
    missing = post(c, "/arena/collections/upload", {})
    assert "Choose an archive file" in missing.text
    anon = site.client()
    refused = anon.post(with_csrf(anon, "/arena/collections/upload"),
                        files={"file": ("a.tar.gz", b"x", "application/gzip")})
    assert refused.status_code == 401 and "sign in" in refused.text


def test_submit_git(site: Site, new_collection: Callable[..., Path], tmp_path: Path) -> None:
    repo = new_collection(2, "gitteam")
    commit = commit_all(repo, "tasks")
    (tmp_path / "served").mkdir()
    server = GitHttpServer(tmp_path / "served")
    try:
        site.settings.git_http_hosts = [server.host]
        url = server.publish(repo, "tasks.git")
        c = site.client("author")
        resp = post(c, "/arena/collections/git", {"url": url, "ref": "main"})
        assert "registered: 2 eligible task(s)" in resp.text, resp.text[-2000:]
        assert commit in resp.text
        bad = post(c, "/arena/collections/git", {"url": url, "ref": "no-such-ref"})
        assert "The repository was not registered" in bad.text
        disk = post(c, "/arena/collections/git", {"url": f"file://{repo}", "ref": "main"})
        assert "The repository was not registered" in disk.text
        assert "editors and admins" in disk.text
    finally:
        server.close()


def test_submit_server_path_needs_an_editor(site: Site,
                                            new_collection: Callable[..., Path]) -> None:
    folder = new_collection(2, "pathteam")
    refused = post(site.client("author"), "/arena/collections/path", {"path": str(folder)})
    assert "The folder was not registered" in refused.text and "editors" in refused.text
    ok = post(site.client("editor"), "/arena/collections/path", {"path": str(folder)})
    assert "registered: 2 eligible task(s)" in ok.text


def test_launch_preflight_collect_review_leaderboard(site: Site, challenge: str,
                                                     uploaded: int) -> None:
    author, editor = site.client("author"), site.client("editor")
    pre = author.get(f"/arena/collections/{uploaded}/launch?challenge={challenge}")
    for check in ("challenge_open", "caller_allowed", "no_active_run", "cooldown", "budget",
                  "eligible_tasks"):
        assert f"<code>{check}</code>" in pre.text
    assert ">skip<" in pre.text and ">FAIL<" not in pre.text and "launch-button" in pre.text
    form = {"challenge": challenge, "collection_id": uploaded, "request_id": "form-1"}
    run_page = post(author, "/arena/runs", form)
    run_id = run_id_of(run_page)
    assert f"Run {run_id} queued" in run_page.text and 'data-state="queued"' in run_page.text
    again = post(author, "/arena/runs", form)  # a double submit returns the same run
    assert run_id_of(again) == run_id and "already submitted" in again.text
    blocked = author.get(f"/arena/collections/{uploaded}/launch?challenge={challenge}")
    assert ">FAIL<" in blocked.text and f"run {run_id} of the same family is active" in \
        blocked.text and "launch-button" not in blocked.text
    with site.db.read() as s:
        assert s.query(Run).count() == 1

    assert site.worker(change_pp=6.0).poll_once() == run_id
    scored = author.get(f"/arena/runs/{run_id}").text
    # the result was stored as the run was scored: there is nothing to choose to collect
    assert 'data-state="scored"' in scored and "collect-button" not in scored
    assert "pending" in scored and 'id="review"' not in scored  # participants cannot review
    sneaky = post(author, f"/arena/runs/{run_id}/review", {"decision": "accept"})
    assert "Not reviewed" in sneaky.text and "editor" in sneaky.text
    no_note = post(editor, f"/arena/runs/{run_id}/review", {"decision": "reject"})
    assert "a rejection needs a note" in no_note.text
    accepted = post(editor, f"/arena/runs/{run_id}/review",
                    {"decision": "accept", "note": "looks right"})
    assert str(accepted.url).endswith(f"/arena/challenges/{challenge}#leaderboard")
    assert "accepted" in accepted.text
    board = site.client().get(f"/arena/challenges/{challenge}").text
    assert '<td class="rank">1</td>' in board and "alpha" in board
    assert "+6.0 pp" in board and "[+2.0, +10.0]" in board
    assert "<svg" in board and 'class="dot ranked"' in board
    with site.db.read() as s:
        assert s.query(Result).count() == 1 and s.query(Review).count() == 1


def test_rejected_results_are_shown_unranked(site: Site, challenge: str,
                                             uploaded: int) -> None:
    author, editor = site.client("author"), site.client("editor")
    run_id = run_id_of(post(author, "/arena/runs",
                            {"challenge": challenge, "collection_id": uploaded}))
    site.worker(change_pp=-3.0).poll_once()
    post(author, f"/arena/runs/{run_id}/collect")
    post(editor, f"/arena/runs/{run_id}/review", {"decision": "reject", "note": "leaky"})
    page = site.client().get(f"/arena/challenges/{challenge}").text
    assert "Rejected (shown, not ranked)" in page and "leaky" in page
    assert 'class="dot rejected"' in page and '<td class="rank">' not in page


def test_cancel_releases_the_reservation(site: Site, challenge: str, uploaded: int) -> None:
    author = site.client("author")
    run_id = run_id_of(post(author, "/arena/runs",
                            {"challenge": challenge, "collection_id": uploaded}))
    assert "Reserved</dt><dd>10.00" in author.get("/arena").text
    refused = post(site.client("other"), f"/arena/runs/{run_id}/cancel")
    assert "Not canceled" in refused.text
    done = post(author, f"/arena/runs/{run_id}/cancel")
    assert "Run canceled" in done.text and 'data-state="canceled"' in done.text
    assert "Reserved</dt><dd>0.00" in author.get("/arena").text


def test_admin_pauses_and_opens_a_challenge(site: Site, challenge: str, uploaded: int) -> None:
    admin = site.client("admin")
    no_reason = post(admin, f"/arena/challenges/{challenge}/health", {"health": "paused"})
    assert "needs a reason" in no_reason.text
    paused = post(admin, f"/arena/challenges/{challenge}/health",
                  {"health": "paused", "reason": "GPU maintenance"})
    assert "now paused" in paused.text and "GPU maintenance" in paused.text
    pre = site.client("author").get(f"/arena/collections/{uploaded}/launch")
    assert ">FAIL<" in pre.text and "GPU maintenance" in pre.text
    editor = post(site.client("editor"), f"/arena/challenges/{challenge}/health",
                  {"health": "open"})
    assert "admin" in editor.text and "flash error" in editor.text
    opened = post(admin, f"/arena/challenges/{challenge}/health", {"health": "open"})
    assert "now open" in opened.text


def test_oversized_uploads_are_refused_with_a_message(site: Site) -> None:
    c = site.client("author")
    big = b"\0" * (site.settings.upload_max_bytes + 100_000)
    resp = post(c, "/arena/collections/upload", {},
                files={"file": ("big.tar.gz", big, "application/gzip")})
    assert resp.status_code == 413 and "larger than" in resp.text  # refused unread
    just_over = b"\0" * (site.settings.upload_max_bytes + 10)
    resp = post(c, "/arena/collections/upload", {},
                files={"file": ("big.tar.gz", just_over, "application/gzip")})
    assert "The upload was not registered" in resp.text and "larger than" in resp.text


def test_user_text_is_escaped(site: Site) -> None:
    c = site.client("author")
    page = post(c, "/board/threads", {"title": "<script>alert(1)</script>",
                                      "body": "<img src=x onerror=alert(2)>"})
    assert "<script>alert(1)" not in page.text and "&lt;script&gt;alert(1)" in page.text
    assert "<img src=x" not in page.text and "&lt;img src=x onerror=alert(2)&gt;" in page.text
    assert "<script>alert(1)" not in site.client().get("/").text
