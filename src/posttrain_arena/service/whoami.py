"""The external token checker: a Hugging Face style `whoami` endpoint, at a bounded cost.

A token that is not an Arena token is asked about once, and the answer (a name, or a
refusal) is kept for `cache_sec`, keyed by the token's sha256: a busy client costs the
provider one call per token per period, and a revoked external token works for up to
that long. A flood of random tokens must not tie up the server, so a new token is asked
about only

- when it has the provider's shape (`hf_` and token characters; anything else is
  refused without a call),
- within a rate (`rate` new checks a second, bursts of `4 x rate`) and a number of checks
  at once (`concurrent`); beyond either, the request answers 429 at once rather than
  waiting (and the refusal is not cached: the token is asked about later),
- with a short timeout.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict

import httpx

from posttrain_arena.service.auth import (
    EXTERNAL_SEPARATOR,
    ExternalIdentity,
    ExternalTokenChecker,
    hash_token,
)
from posttrain_arena.service.errors import RateLimited
from posttrain_arena.service.models import USER_NAME_MAX

_HF_TOKEN = re.compile(r"hf_[A-Za-z0-9_-]{1,200}")


class TokenBucket:
    """`rate` events a second on average, `burst` at once; thread-safe."""

    def __init__(self, rate: float, burst: float):
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.at = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Use one event if there is one now."""
        with self._lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class HuggingFaceWhoami:
    """External checker calling a Hugging Face style `whoami` endpoint (module docstring)."""

    def __init__(self, url: str = "https://huggingface.co/api/whoami-v2", timeout: float = 5,
                 cache_sec: float = 60.0, max_cached: int = 10_000, rate: float = 5.0,
                 concurrent: int = 4):
        self.url = url
        self.timeout = timeout
        self.cache_sec = cache_sec
        self.max_cached = max_cached
        self.calls = 0
        self._cache: OrderedDict[str, tuple[float, ExternalIdentity | None]] = OrderedDict()
        self._lock = threading.Lock()
        self._bucket = TokenBucket(rate, 4 * rate)
        self._slots = threading.BoundedSemaphore(concurrent)

    def check(self, token: str) -> ExternalIdentity | None:
        if _HF_TOKEN.fullmatch(token) is None:
            return None
        key, now = hash_token(token), time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        if not self._bucket.take() or not self._slots.acquire(blocking=False):
            raise RateLimited("too many new sign-in tokens are being checked right now; "
                              "retry in a few seconds")
        try:
            ident = self._ask(token)
        finally:
            self._slots.release()
        with self._lock:
            self._cache[key] = (now + self.cache_sec, ident)
            self._cache.move_to_end(key)
            while len(self._cache) > self.max_cached:
                self._cache.popitem(last=False)
        return ident

    def _ask(self, token: str) -> ExternalIdentity | None:
        self.calls += 1
        try:
            resp = httpx.get(self.url, headers={"Authorization": f"Bearer {token}"},
                             timeout=self.timeout)
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        try:
            body = resp.json()
        except ValueError:  # not JSON: no identity, as for any other bad answer
            return None
        name = body.get("name") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            return None
        ident = f"hf{EXTERNAL_SEPARATOR}{name}"
        if len(ident) > USER_NAME_MAX:  # longer than a user name may be: not a 500
            return None
        return ExternalIdentity(external_id=ident, name=ident)


def external_checker(kind: str | None, url: str, cache_sec: float = 60.0,
                     rate: float = 5.0, timeout: float = 5.0) -> ExternalTokenChecker | None:
    """The configured external checker (None when off, the default)."""
    if kind is None:
        return None
    if kind == "huggingface":
        return HuggingFaceWhoami(url, timeout=timeout, cache_sec=cache_sec, rate=rate)
    raise ValueError(f"unknown external_auth {kind!r}; use 'huggingface' or leave it unset")
