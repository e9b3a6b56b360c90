"""Which git URLs a caller may have the server fetch, and how git must reach them.

A participant's URL must not reach the server's disk, its SSH identity or its private
network: only `https://` (plain `http://` only to hosts the operator lists), no user
name or password in the URL, and a host that is either listed by the operator or whose
every address is public. The addresses checked are the ones git connects to (they are
pinned with `http.curloptResolve`), so a name that resolves differently a moment later
cannot turn the fetch towards a private address. Redirects are not followed for
participants, for the same reason.

Editors and admins may also fetch `file://` URLs and server paths (as they may register
server folders). ssh, scp-style (`git@host:path`), `git://`, `ext::` and every other
transport are refused for everyone: the server has no SSH identity to lend a
collection, and the other transports run programs or reach unauthenticated daemons.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from posttrain_arena.service.errors import BadRequest, Forbidden

# git's `<transport>::<address>` syntax (ext::, fd::, any remote helper)
_HELPER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+.-]*::")
# git reads `[user@]host:path` with no slash before the colon as scp-style ssh
_SCP = re.compile(r"^[^/]*:")
_DEFAULT_PORTS = {"https": 443, "http": 80}


@dataclass(frozen=True)
class SourcePolicy:
    """What one caller may fetch: the operator's host lists plus the caller's role."""

    trusted: bool = False  # editors and admins: file:// and server paths, any host
    https_hosts: tuple[str, ...] = ()  # when set, the only hosts participants may use
    http_hosts: tuple[str, ...] = ()  # hosts where participants may use plain http://


@dataclass(frozen=True)
class Remote:
    """A URL that passed the policy, with the git settings that hold git to it."""

    url: str
    protocol: str  # "https", "http" or "file"
    config: tuple[str, ...] = field(default=())  # extra `-c key=value` for git


def _host_key(host: str, port: int, scheme: str) -> set[str]:
    keys = {f"{host}:{port}"}
    if port == _DEFAULT_PORTS.get(scheme):
        keys.add(host)
    return keys


def _listed(host: str, port: int, scheme: str, hosts: tuple[str, ...]) -> bool:
    wanted = {h.strip().lower() for h in hosts if h.strip()}
    return bool(_host_key(host, port, scheme) & wanted)


def _public_addresses(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise BadRequest(f"the git host {host!r} does not resolve; check the URL") from None
    addresses = sorted({str(info[4][0]) for info in infos})
    for addr in addresses:
        if not ipaddress.ip_address(addr.split("%")[0]).is_global:
            raise Forbidden(f"the git host {host!r} resolves to {addr}, a private or local "
                            "address; participants may fetch only from public hosts (an "
                            "operator can allow this host with ARENA_GIT_HTTPS_HOSTS)")
    if not addresses:
        raise BadRequest(f"the git host {host!r} has no address")
    return addresses


def _curl_resolve(host: str, port: int, addresses: list[str]) -> str:
    shown = ",".join(f"[{a}]" if ":" in a else a for a in addresses)
    return f"http.curloptResolve={host}:{port}:{shown}"


def check_git_url(url: str, policy: SourcePolicy) -> Remote:
    """The `Remote` for `url` if `policy` allows it; BadRequest or Forbidden (with what
    is allowed instead) otherwise. Never touches the URL's repository."""
    url = url.strip()
    if _HELPER.match(url):
        raise BadRequest(f"{url!r} uses a git remote helper ('::'); give an https:// URL")
    if not url or url.startswith("-") or any(c in url for c in "\0\n\r\t "):
        raise BadRequest(f"{url!r} is not a git URL; give an https:// URL")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if not scheme or "://" not in url:
        if _SCP.match(url) and not url.startswith("/"):
            raise BadRequest(f"{url!r} is an scp-style ssh address; the server fetches "
                             "collections over https only: give the https:// URL")
        return _local(url, policy)
    if scheme == "file":
        return _local(parts.path, policy)
    if scheme not in ("https", "http"):
        raise BadRequest(f"{scheme}:// URLs are not fetched (the server lends no SSH "
                         "identity and runs no transport programs); give an https:// URL")
    if parts.username is not None or parts.password is not None:
        raise BadRequest("the git URL holds a user name or password; collections come "
                         "from public repositories: drop the credentials")
    host = (parts.hostname or "").lower()
    if not host:
        raise BadRequest(f"{url!r} names no host")
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise BadRequest(f"{url!r} has a bad port") from None
    if policy.trusted:
        return Remote(url=url, protocol=scheme)
    plain_ok = _listed(host, port, scheme, policy.http_hosts)
    if scheme == "http" and not plain_ok:
        raise Forbidden(f"plain http:// is not allowed for {host}:{port}; give the "
                        "https:// URL (an operator can allow http for a host with "
                        "ARENA_GIT_HTTP_HOSTS)")
    config = ["http.followRedirects=false"]
    if not (plain_ok or _listed(host, port, scheme, policy.https_hosts)):
        if policy.https_hosts:
            raise Forbidden(f"the server fetches collections only from "
                            f"{', '.join(policy.https_hosts)}; {host} is not one of them")
        config.append(_curl_resolve(host, port, _public_addresses(host, port)))
    return Remote(url=url, protocol=scheme, config=tuple(config))


def _local(path: str, policy: SourcePolicy) -> Remote:
    if not policy.trusted:
        raise Forbidden("file:// URLs and server paths reach the server's own disk and are "
                        "for editors and admins; give an https:// URL")
    if not path.startswith("/"):
        raise BadRequest(f"{path!r} is not an absolute path on the server")
    return Remote(url=f"file://{path}", protocol="file")
