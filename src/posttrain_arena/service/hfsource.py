"""Hugging Face datasets as a collection source: `hf://datasets/ORG/NAME@REVISION[/PATH]`.

The hub's API (huggingface_hub, pointed at the configured endpoint, never with the
server's own token) resolves the revision to a commit and says whether the dataset is
public and ungated; the files are then fetched from the hub's git server
(`ENDPOINT/datasets/ORG/NAME`) by gitsource.py, with the same bounds as any git source,
and pinned to that commit. PATH, when given, is the folder holding the collection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from posttrain_arena.service.errors import BadRequest, Forbidden
from posttrain_arena.service.sourceurl import Remote

_HF = re.compile(
    r"^hf://datasets/(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95})"
    r"@(?P<revision>[A-Za-z0-9][\w.-]{0,199})(?:/(?P<path>[\w./ -]*))?$"
)


@dataclass(frozen=True)
class HfDataset:
    """A parsed hf:// source."""

    repo_id: str
    revision: str
    path: str | None

    def tree_url(self, endpoint: str, commit: str) -> str:
        """Where the pinned files can be seen on the hub."""
        tail = f"/{self.path}" if self.path else ""
        return f"{endpoint.rstrip('/')}/datasets/{self.repo_id}/tree/{commit}{tail}"


def parse_hf_url(url: str) -> HfDataset:
    """The dataset, revision and folder of an hf:// URL; BadRequest saying the form."""
    found = _HF.match(url.strip())
    if not found:
        raise BadRequest(f"{url!r} is not an hf:// dataset source; the form is "
                         "hf://datasets/ORG/NAME@REVISION or .../NAME@REVISION/FOLDER "
                         "(REVISION: a branch, tag or commit without '/')")
    path = (found.group("path") or "").strip("/") or None
    if path is not None and any(part in ("", ".", "..") for part in path.split("/")):
        raise BadRequest(f"{path!r} is not a folder of the dataset")
    return HfDataset(found.group("repo"), found.group("revision"), path)


def resolve_revision(endpoint: str, ds: HfDataset, timeout: float) -> str:
    """The commit `ds.revision` names on the hub; refuses private, gated or disabled
    datasets (a collection is public)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    api = HfApi(endpoint=endpoint.rstrip("/"), token=False)
    try:
        info = api.dataset_info(ds.repo_id, revision=ds.revision, timeout=timeout,
                                token=False)
    except RevisionNotFoundError:
        raise BadRequest(f"the dataset {ds.repo_id} has no revision {ds.revision!r}") from None
    except RepositoryNotFoundError:
        raise BadRequest(f"there is no public dataset {ds.repo_id} on {endpoint}") from None
    except (HfHubHTTPError, Exception) as exc:  # any transport error of the hub client
        raise BadRequest(f"the hub at {endpoint} did not answer for {ds.repo_id}: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                         ) from None
    if info.private or info.gated or info.disabled:
        raise Forbidden(f"the dataset {ds.repo_id} is private, gated or disabled; a "
                        "collection must be a public, ungated dataset")
    if not info.sha or not re.fullmatch(r"[0-9a-f]{40}", info.sha):
        raise BadRequest(f"the hub gave no commit for {ds.repo_id}@{ds.revision}")
    return info.sha


def hub_remote(endpoint: str, ds: HfDataset) -> Remote:
    """The hub's git URL of the dataset. The endpoint is the operator's setting, so its
    host needs no public-address check; redirects are still not followed."""
    scheme = urlsplit(endpoint).scheme.lower()
    if scheme not in ("https", "http"):
        raise BadRequest(f"the hub endpoint {endpoint!r} must be an http(s) URL")
    return Remote(url=f"{endpoint.rstrip('/')}/datasets/{ds.repo_id}", protocol=scheme,
                  config=("http.followRedirects=false",))
