"""Every page renders for anonymous and signed-in viewers, with role-appropriate content,
and bad addresses, bad input and missing rights get readable HTML error pages."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from posttrain_arena.task_format.domains import Domain

from .conftest import ROLES, Site, post

VIEWERS = [None, *ROLES]


@pytest.mark.parametrize("who", VIEWERS)
def test_every_page_renders_for_every_viewer(site: Site, challenge: str, uploaded: int,
                                             who: str | None) -> None:
    author = site.client("author")
    post(author, "/board/threads", {"title": "Hello arena", "body": "first post"})
    launched = post(author, "/arena/runs", {"challenge": challenge, "collection_id": uploaded,
                                            "request_id": "r-1"})
    run_id = int(str(launched.url).rsplit("/", 1)[-1])
    c = site.client(who)
    pages = ["/", "/board/1", "/arena", "/arena/budget", f"/arena/challenges/{challenge}",
             f"/arena/collections/{uploaded}", f"/arena/runs/{run_id}", "/signin"]
    for url in pages:
        resp = c.get(url)
        assert resp.status_code == 200, (url, resp.text[:500])
        assert "text/html" in resp.headers["content-type"]
        assert "PostTrain Arena" in resp.text
        if who is None:
            assert "Sign in" in resp.text
        else:
            assert f"{who} <span class=\"role\">{ROLES[who]}</span>" in resp.text
    launch_page = c.get(f"/arena/collections/{uploaded}/launch?challenge={challenge}")
    if who is None:
        assert str(launch_page.url).endswith(f"/signin?next=/arena/collections/{uploaded}")
    else:
        assert launch_page.status_code == 200 and "Preflight" in launch_page.text


def test_arena_page_shows_challenges_collections_runs_and_budget(
        site: Site, challenge: str, uploaded: int) -> None:
    author = site.client("author")
    post(author, "/arena/runs", {"challenge": challenge, "collection_id": uploaded,
                                 "request_id": "x"})
    page = site.client().get("/arena").text
    assert "Micro challenge" in page and "open" in page
    assert "alpha" in page and "<b>2</b> of 2" in page
    assert Domain.SOFTWARE_ENGINEERING.display_name in page
    assert 'data-state="queued"' in page
    # budget: cap 100, one run reserving 10
    for label, value in (("Cap", "100.00"), ("Reserved", "10.00"), ("Left", "90.00")):
        assert f"<dt>{label}</dt><dd" in page and value in page
    assert "Sign in</a> to submit a collection" in page
    assert 'action="/arena/collections/upload?' not in page
    assert 'action="/arena/collections/upload?csrf=' in author.get("/arena").text


def test_collection_page_lists_tasks_with_domain_names(site: Site, challenge: str,
                                                       uploaded: int) -> None:
    page = site.client().get(f"/arena/collections/{uploaded}").text
    assert "task-alpha-0" in page and "task-alpha-1" in page
    assert Domain.SOFTWARE_ENGINEERING.display_name in page
    assert Domain.FINANCE_ECONOMICS.display_name in page
    assert "eligible" in page
    # only the author and editors see the launch form
    assert 'action="/arena/collections/' + str(uploaded) + '/launch"' not in page
    other = site.client("other").get(f"/arena/collections/{uploaded}").text
    assert "launched by its author and by editors" in other
    for who in ("author", "editor"):
        assert f'/arena/collections/{uploaded}/launch"' in site.client(who).get(
            f"/arena/collections/{uploaded}").text


def test_challenge_page_shows_only_suite_aggregates(site: Site, challenge: str,
                                                    tmp_path: object) -> None:
    page = site.client("author").get(f"/arena/challenges/{challenge}").text
    assert "Held-out suite (sealed)" in page
    assert "sha256:" + "1" * 64 in page and "sample-task-one" in page
    assert Domain.NATURAL_SCIENCE.display_name in page
    assert "No accepted results yet" in page
    assert "Health (admin)" not in page
    assert "Health (admin)" in site.client("admin").get(f"/arena/challenges/{challenge}").text


@pytest.mark.parametrize("url, status, text", [
    ("/arena/runs/999", 404, "no run 999"),
    ("/arena/collections/999", 404, "no collection 999"),
    ("/arena/challenges/nope", 404, "no challenge &#39;nope&#39;"),
    ("/board/42", 404, "no thread 42"),
    ("/no/such/page", 404, "there is no page at this address"),
    ("/arena/runs/abc", 400, "run_id"),
])
def test_error_pages_say_what_happened_and_what_to_do(site: Site, url: str, status: int,
                                                      text: str) -> None:
    resp = site.client().get(url)
    assert resp.status_code == status
    assert "text/html" in resp.headers["content-type"]
    assert text in resp.text and "Go to the Arena" in resp.text


def test_api_errors_stay_json(site: Site) -> None:
    resp = site.client().get("/api/runs/999")
    assert resp.status_code == 404 and resp.json()["code"] == "not-found"
    assert site.client().get("/api/nope").headers["content-type"].startswith(
        "application/json")


def test_forbidden_launch_page_is_a_403_page(site: Site, challenge: str,
                                             uploaded: int) -> None:
    resp = site.client("other").get(f"/arena/collections/{uploaded}/launch")
    assert resp.status_code == 200  # the preflight itself is readable ...
    assert "FAIL" in resp.text and "launch-button" not in resp.text  # ... but blocks
    launch = post(site.client("other"), "/arena/runs",
                  {"challenge": challenge, "collection_id": uploaded})
    assert "The run was not launched" in launch.text
    assert "belongs to the collection&#39;s author and to editors" in launch.text


def test_a_revoked_session_signs_the_viewer_out(site: Site) -> None:
    c = site.client("author")
    assert "author <span" in c.get("/arena").text
    site.app.state.sessions.end_all(site.user_ids["author"])
    page = c.get("/arena")
    assert page.status_code == 200
    assert "sign-in has ended" in page.text and "Sign in" in page.text
    assert "arena_session" not in c.cookies


def test_a_forged_or_expired_session_cookie_signs_no_one_in(site: Site) -> None:
    c = site.client("author")
    real = str(c.cookies["arena_session"])
    prefix, secret, expires, sig = real.split(".")
    later = str(int(expires) + 10**6)
    for forged in (f"{prefix}.{secret}.{later}.{sig}",  # expiry moved: the signature fails
                   f"{prefix}.{secret}x.{expires}.{sig}", "arena_anything", ""):
        other = TestClient(site.app)
        other.cookies.set("arena_session", forged)
        assert "author <span" not in other.get("/arena").text, forged
    short = site.app.state.sessions
    short_lived = type(short)(short.db, short.key, ttl_sec=-1)  # already expired
    from posttrain_arena.service.auth import Principal

    cookie, _ = short_lived.start(Principal(user_id=site.user_ids["author"], name="author"))
    other = TestClient(site.app)
    other.cookies.set("arena_session", cookie)
    assert "author <span" not in other.get("/arena").text


def test_static_assets_are_local(site: Site) -> None:
    c = site.client()
    for url in ("/static/arena.css", "/static/arena.js"):
        assert c.get(url).status_code == 200
    for url in ("/", "/arena", "/signin"):
        text = c.get(url).text
        assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert "https://" not in text


@pytest.mark.parametrize("error, status, advice", [
    ("forbidden", 403, "Your role does not allow this"),
    ("unauthorized", 401, "Sign in with your API token"),
])
def test_page_routes_turn_service_errors_into_pages(site: Site, error: str, status: int,
                                                    advice: str) -> None:
    from fastapi import APIRouter, FastAPI
    from fastapi.testclient import TestClient

    from posttrain_arena.service.errors import Forbidden, Unauthorized
    from posttrain_arena.service.web.page import PageRoute

    router = APIRouter(route_class=PageRoute)

    @router.get("/guarded")
    def guarded() -> None:
        raise (Forbidden if error == "forbidden" else Unauthorized)("not for you")

    app = FastAPI()
    app.state.db = site.db
    app.include_router(router)
    resp = TestClient(app).get("/guarded")
    assert resp.status_code == status and "text/html" in resp.headers["content-type"]
    assert "not for you" in resp.text and advice in resp.text
