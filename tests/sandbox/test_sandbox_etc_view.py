"""The local sandbox's /etc: one bind of a view of copies, never more than allowed, never
a private key or a credentials file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from posttrain_arena.sandbox import Limits, get_backend
from posttrain_arena.sandbox.bwrap import (
    _build_view,
    _etc_args,
    _etc_entries,
    _etc_key,
    _etc_stamp,
    _stamp_holds,
    _stamp_key,
)
from posttrain_arena.sandbox.localfs import etc_allowed

from .conftest import write_context


def _fake_etc(root: Path) -> Path:
    etc = root / "etc"
    (etc / "ssl" / "certs").mkdir(parents=True)
    (etc / "passwd").write_text("root:x:0:0::/root:/bin/bash\n")
    (etc / "shadow").write_text("root:secret\n")  # not allowed: never in the view
    (etc / "ssl" / "certs" / "ca.pem").write_text("CA\n")
    (etc / "ssl" / "private").mkdir(mode=0o700)
    (etc / "ssl" / "private" / "server.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    os.chmod(etc / "ssl" / "private", 0o700)
    (etc / "ssl" / "certs" / "client.key").write_text("a key beside the roots\n")
    (etc / "pip.conf").write_text("[global]\nindex-url = https://u:secret@pypi.corp\n")
    (etc / "gitconfig").write_text("[credential]\n\thelper = store\n")
    (etc / "netrc").write_text("machine corp login u password p\n")
    os.symlink("/proc/self/mounts", etc / "mtab")
    return etc


def test_the_view_copies_allowed_entries_and_keeps_modes_without_secrets(
        tmp_path: Path) -> None:
    etc = _fake_etc(tmp_path)
    names = _etc_entries(str(etc))
    assert names == ["mtab", "passwd", "ssl"] and not etc_allowed("shadow")
    assert not any(etc_allowed(n) for n in ("pip.conf", "gitconfig", "netrc"))
    view = tmp_path / "view"
    assert _build_view(names, view, str(etc)) == []
    assert sorted(os.listdir(view)) == names
    assert os.stat(view / "passwd").st_ino != os.stat(etc / "passwd").st_ino  # a copy
    assert (view / "passwd").read_text() == (etc / "passwd").read_text()
    assert os.readlink(view / "mtab") == "/proc/self/mounts"
    assert (view / "ssl" / "certs" / "ca.pem").read_text() == "CA\n"
    assert sorted(os.listdir(view / "ssl")) == ["certs"]  # no ssl/private
    assert sorted(os.listdir(view / "ssl" / "certs")) == ["ca.pem"]  # no *.key
    (etc / "passwd").unlink()  # removed from /etc: nothing of it lives on in a new view
    assert os.stat(view / "passwd").st_nlink == 1


def test_the_key_changes_when_an_entry_is_added_removed_or_replaced(tmp_path: Path) -> None:
    etc = _fake_etc(tmp_path)
    keys = [_etc_key(_etc_entries(str(etc)), str(etc))]
    os.utime(etc / "passwd", ns=(1, 1))
    keys.append(_etc_key(_etc_entries(str(etc)), str(etc)))  # edited in place: the view
    # holds a copy, so it is made again
    (etc / "ssl" / "certs" / "new.pem").write_text("new\n")  # added deep down
    keys.append(_etc_key(_etc_entries(str(etc)), str(etc)))
    new = etc / "passwd.new"
    new.write_text("replaced\n")
    os.replace(new, etc / "passwd")  # replaced by rename: a new inode
    keys.append(_etc_key(_etc_entries(str(etc)), str(etc)))
    (etc / "hosts").write_text("127.0.0.1 localhost\n")  # a new allowed entry
    keys.append(_etc_key(_etc_entries(str(etc)), str(etc)))
    assert len(set(keys)) == len(keys), keys


def test_looking_again_stats_only_what_the_key_was_made_from(tmp_path: Path) -> None:
    """The once-a-second look at /etc: the stamp holds while nothing allowed changed,
    and stops holding at every change the full key would see, so the view is made
    again."""
    etc = _fake_etc(tmp_path)

    def stamp() -> tuple[tuple[str, int], ...]:
        return _etc_stamp(_etc_entries(str(etc)), str(etc))

    first = stamp()
    (etc / "shadow").write_text("edited too\n")  # not allowed, edited in place
    assert _stamp_holds(first)
    changes = [
        lambda: os.utime(etc / "passwd", ns=(2, 2)),  # a top-level file edited in place
        lambda: (etc / "ssl" / "certs" / "new.pem").write_text("new\n"),  # deep down
        lambda: (etc / "ssl" / "certs" / "new.pem").unlink(),
        lambda: (etc / "ssl" / "sub").mkdir(),  # a new directory
        lambda: (etc / "passwd.new").write_text("x\n") or os.replace(
            etc / "passwd.new", etc / "passwd"),  # replaced by rename
        lambda: (etc / "hosts").write_text("127.0.0.1 localhost\n"),  # a new entry
        lambda: os.unlink(etc / "mtab"),  # an entry gone
    ]
    for change in changes:
        before = stamp()
        assert _stamp_holds(before)
        change()
        assert not _stamp_holds(before)
        assert _etc_key(_etc_entries(str(etc)), str(etc)) != _stamp_key(before)


@pytest.mark.bwrap
def test_the_sandbox_sees_the_hosts_allowed_etc_and_cannot_write_it(tmp_path: Path,
                                                                    _cache_dir: Path) -> None:
    args = _etc_args()
    assert args.count("/etc") == 1 or "--dir" in args  # one bind (or the fallback)
    backend = get_backend("local")
    ref = backend.build(write_context(tmp_path, "FROM x\n"), timeout=60)
    s = backend.start(ref, limits=Limits())
    try:
        listing = s.exec(["ls", "-A", "/etc"]).stdout.split()
        assert sorted(listing) == _etc_entries()
        assert s.exec(["cat", "/etc/passwd"]).stdout == Path("/etc/passwd").read_text()
        assert s.exec(["test", "-e", "/etc/shadow"]).exit_code != 0
        # This host's own secrets (where it has them) stay on the host, root or not.
        for secret in ("/etc/ssl/private", "/etc/pip.conf", "/etc/gitconfig", "/etc/netrc"):
            assert s.exec(["test", "-e", secret]).exit_code != 0, secret
        if Path("/etc/ssl/certs").is_dir():  # the public roots stay
            assert s.exec(["test", "-d", "/etc/ssl/certs"]).exit_code == 0
        r = s.exec("touch /etc/arena-x; touch /etc/passwd; echo >> /etc/passwd; echo rc=$?")
        assert "rc=0" not in r.stdout and not Path("/etc/arena-x").exists()
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout
        assert s.exec(["id", "-un"]).stdout == user  # the name service works inside
    finally:
        s.stop()


def test_the_reaper_keeps_the_view_in_use_however_old_and_a_lost_view_is_rebuilt(
        tmp_path: Path) -> None:
    import time

    from posttrain_arena.sandbox.bwrap import current_etc_view
    from posttrain_arena.sandbox.localfs import sessions_dir
    from posttrain_arena.sandbox.reaper import reap_local

    args = _etc_args()
    view = Path(args[1])
    assert args[2] == "/etc" and view.name == current_etc_view() and view.is_dir()
    # Another view (an /etc since changed, or a test's), newer than the one in use: the
    # reaper used to keep only the newest, removing the view every process still binds.
    other = sessions_dir() / "etc-view-0000test0000"
    other.mkdir(exist_ok=True)
    old = time.time() - 7200
    os.utime(view, (old, old))
    reap_local(max_age_sec=3600)
    assert view.is_dir()
    assert other.is_dir()  # too new to go
    os.utime(other, (old, old))
    reap_local(max_age_sec=3600)
    assert not other.exists() and view.is_dir()
    # A view removed under a process's cache (by a reaper elsewhere) is built again.
    import shutil

    shutil.rmtree(view)
    again = _etc_args()
    assert again[1] == str(view) and view.is_dir()
    done = subprocess.run(["bwrap", *again, "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin",
                           "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64",
                           "/lib64", "cat", "/etc/passwd"], capture_output=True, text=True)
    assert done.returncode == 0 and "root" in done.stdout, done.stderr


def test_the_harness_side_view_of_etc_hides_the_same_names() -> None:
    """Copies out of a local sandbox map paths through SandboxFS: the hidden names are
    outside its view there too, at any depth."""
    from posttrain_arena.sandbox.localfs import SandboxFS

    fs = SandboxFS(Path("/nonexistent-state"), [])
    for hidden in ("/etc/ssl/private", "/etc/ssl/private/server.key", "/etc/pip.conf",
                   "/etc/gitconfig", "/etc/ssl/certs/client.key", "/etc/netrc"):
        assert fs.host_of(hidden) == (None, False), hidden
    assert fs.host_of("/etc/ssl/certs/ca.pem") == (Path("/etc/ssl/certs/ca.pem"), False)
