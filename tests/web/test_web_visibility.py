"""The budget page and a collection's near-duplicate standing, per viewer: a quota's
figures for its user (or team) and for organizers, a hold for the collection's owner and
editors, and none of either for anyone else."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from posttrain_arena.service.accounts import update_user
from posttrain_arena.service.auth import SYSTEM
from posttrain_arena.service.quotas import set_quota
from posttrain_arena.service.schemas import UserUpdate

from .conftest import Site, pack, post


def _text(html: str) -> str:
    """The page's visible words (tags dropped, white space folded)."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_budget_page_shows_each_viewer_their_own_figures(
        site: Site, challenge: str, uploaded: int) -> None:
    with site.db.write() as s:
        update_user(s, SYSTEM, "other", UserUpdate(team="blue"))
        set_quota(s, SYSTEM, "user", "author", 37.0)
        set_quota(s, SYSTEM, "team", "blue", 41.0)
    post(site.client("author"), "/arena/runs",
         {"challenge": challenge, "collection_id": uploaded, "request_id": "q-1"})

    anonymous = site.client().get("/arena/budget")
    assert anonymous.status_code == 200
    words = _text(anonymous.text)
    assert "100.00" in words and "90.00" in words  # the global cap and what is left
    assert "37.00" not in words and "41.00" not in words  # no quota's figures
    assert "quotas-table" not in anonymous.text and "Sign in to see your own use" in words

    author = _text(site.client("author").get("/arena/budget").text)
    assert "You (author) 10.00" in author and "You (author)" not in words
    assert "user author yours 37.00 10.00 27.00" in author
    assert "41.00" not in author  # another team's quota

    other = _text(site.client("other").get("/arena/budget").text)
    assert "Team blue 0.00" in other and "team blue yours 41.00 0.00 41.00" in other
    assert "37.00" not in other

    admin = site.client("admin").get("/arena/budget").text
    rows = re.findall(r'data-kind="(\w+)" data-name="([\w-]+)"', admin)
    assert rows == [("team", "blue"), ("user", "author")]
    assert "arena admin set-quota" in admin
    # the /arena page's budget card tells a signed-in viewer their use and links the page
    arena = site.client("author").get("/arena").text
    assert 'id="your-use"' in arena and 'href="/arena/budget"' in arena
    assert 'id="your-use"' not in site.client().get("/arena").text
    launch = site.client("author").get(f"/arena/collections/{uploaded}/launch")
    assert "Your use: 10.00" in _text(launch.text)


def test_a_held_copy_s_page_tells_its_owner_and_editors_only(
        site: Site, new_collection: Callable[..., Path], tmp_path: Path) -> None:
    original = new_collection(n_tasks=3, team="vic")
    victim = post(site.client("author"), "/arena/collections/upload",
                  {"name": "victims-private-name"},
                  files={"file": ("v.tar.gz", pack(original), "application/gzip")})
    victim_id = int(str(victim.url).rsplit("/", 1)[-1])
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    for md in copy.glob("envs/*/task.md"):
        md.write_text(md.read_text() + "\n<!-- mine now -->\n")
    held = post(site.client("other"), "/arena/collections/upload", {"name": "the-copy"},
                files={"file": ("c.tar.gz", pack(copy), "application/gzip")})
    held_id = int(str(held.url).rsplit("/", 1)[-1])
    url = f"/arena/collections/{held_id}"

    owner = site.client("other").get(url).text
    assert 'id="near-duplicate" data-state="held"' in owner
    assert f'href="/arena/collections/{victim_id}">collection #{victim_id}' in owner
    assert f"arena admin clear-duplicate {held_id}" in owner
    assert "victims-private-name" not in owner and 'id="clear-button"' not in owner
    for who in (None, "author"):  # anonymous, and the matched collection's own author
        page = site.client(who).get(url).text
        assert 'id="near-duplicate"' not in page and "clear-duplicate" not in page
        assert "victims-private-name" not in page
        assert f"/arena/collections/{victim_id}" not in page

    editor = site.client("editor")
    page = editor.get(url).text
    assert "victims-private-name" in page and 'id="clear-button"' in page
    listing = editor.get("/arena").text
    assert 'id="held"' in listing and f'data-collection-id="{held_id}"' in listing
    assert 'id="held"' not in site.client("other").get("/arena").text
    cleared = post(editor, f"/arena/collections/{held_id}/clear-duplicate")
    assert "may launch, with limits of its own" in cleared.text
    assert 'data-state="cleared"' in cleared.text
    assert f'data-collection-id="{held_id}"' not in editor.get("/arena").text
    refused = post(site.client("other"), f"/arena/collections/{held_id}/clear-duplicate")
    assert "needs the editor role" in refused.text
