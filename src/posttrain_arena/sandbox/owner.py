"""Who owns a sandbox: this process, named so that a reaper on any machine can tell
whether the owner is gone (and never judges a pid from another host or pid namespace)."""

from __future__ import annotations

import os
import socket


def owner_label() -> str:
    """host:pid-namespace:pid of this process, so the reaper can tell a crashed owner's
    containers (and never judges a pid from another machine or namespace)."""
    return f"{socket.gethostname()}:{pid_namespace()}:{os.getpid()}"


def pid_namespace() -> str:
    """An id of this process's pid namespace ('' if unknown)."""
    try:
        return os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        return ""
