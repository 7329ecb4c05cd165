"""Posture: what an identity's endpoints reported, and whether a posture check passes on it.

Reported data is volatile, as upstream keeps it: one ``PostureState`` per identity in the
controller's memory (``ctl.posture_states``), lost on restart. OS, domain and MAC responses are
single slots (the last one wins); process responses are kept by the posture check id they
answer and by path; wake/unlock events per API session. MFA comes from the API session row
(``mfa_passed_at``, written by ``ziti_lite.auth.mfa`` when TOTP is given).

``passes`` evaluates one check (a ``posture_checks`` row) for one (identity, API session);
``failure`` describes why it fails (failed service requests), ``query`` renders it as a
service's ``postureQueries`` entry. ``TYPES`` is the one table of posture check types: each
type's columns, posture-check-types row, detail render and evaluation (the management resource
in ``resources/posture.py`` and the built-in rows read it too).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import msgspec

from .. import clock, semver
from ..api import envelope as env

if TYPE_CHECKING:
    from ..db.store import Store

GRACE_SECONDS = 300          # MFA prompt grace after a wake or unlock
NO_TIMEOUT = -1
MIN_C_SDK = semver.key((0, 25, 0, None))
FAILURES_KEPT = 100


@dataclass
class SessionPosture:
    woken_at: str | None = None
    unlocked_at: str | None = None


@dataclass
class PostureState:
    """What one identity's endpoints reported."""
    os: dict | None = None          # postureCheckId, type, version, build, lastUpdatedAt
    domain: dict | None = None      # postureCheckId, domain, lastUpdatedAt
    mac: dict | None = None         # postureCheckId, addresses, lastUpdatedAt
    processes: dict = field(default_factory=dict)   # check id -> process response
    by_path: dict = field(default_factory=dict)     # path -> latest process response
    sessions: dict = field(default_factory=dict)    # API session id -> SessionPosture
    failures: deque = field(default_factory=lambda: deque(maxlen=FAILURES_KEPT))
    changed_at: str | None = None


EMPTY = PostureState()


class PolicyController(Protocol):
    """The controller as the policy engine sees it (see ``lifecycle.contexts.LifecycleController``)."""
    store: Store
    posture_states: dict[str, PostureState]


def states(ctl: PolicyController) -> dict:
    return ctl.posture_states


def state(ctl: PolicyController, identity_id: str) -> PostureState:
    st = states(ctl).get(identity_id)
    if st is None:
        st = states(ctl)[identity_id] = PostureState()
    return st


def clean_hex(text: str | None) -> str:
    """MACs, hashes, signer fingerprints: lowercase hex, everything else removed."""
    return re.sub(r"[^0-9a-f]", "", (text or "").lower())


@functools.lru_cache(maxsize=1024)
def _json(text: str | None):
    """Parsed JSON column (cached by text: treat the result as read-only)."""
    return json.loads(text) if text else None


class Subject:
    """Whose posture is evaluated: one identity on one API session (lazy, per request)."""

    def __init__(self, ctl: PolicyController, identity_id: str, api_session_id: str | None):
        self.ctl, self.identity_id, self.api_session_id = ctl, identity_id, api_session_id
        self.state = states(ctl).get(identity_id) or EMPTY
        self._mfa: tuple | None = None
        self._sdk: tuple | None = None

    @property
    def session(self) -> SessionPosture:
        return self.state.sessions.get(self.api_session_id) or SessionPosture()

    def mfa_passed_at(self) -> dt.datetime | None:
        if self._mfa is None:
            text = None
            if self.api_session_id:
                text = self.ctl.store.value(
                    "SELECT mfa_passed_at FROM api_sessions WHERE id = ?", (self.api_session_id,)
                )
            self._mfa = (clock.parse(text) if text else None,)
        return self._mfa[0]

    def legacy_sdk(self) -> bool:
        """A C SDK older than 0.25.0 (which cannot answer MFA prompts)."""
        if self._sdk is None:
            text = self.ctl.store.value("SELECT sdk_info FROM identities WHERE id = ?", (self.identity_id,))
            info = _json(text) or {}
            legacy = False
            if info.get("type") == "ziti-sdk-c":
                v = semver.parse(info.get("version") or "")
                legacy = v is not None and semver.key(v) < MIN_C_SDK
            self._sdk = (legacy,)
        return self._sdk[0]


# ------------------------------------------------------------------ evaluation
def _os_passes(check: dict, st: PostureState) -> bool:
    reported = st.os
    if not reported:
        return False
    for entry in _json(check["operating_systems"]) or ():
        if entry["type"].lower() != (reported.get("type") or "").lower():
            continue
        versions = entry.get("versions") or []
        if not versions:
            return True
        if any(semver.satisfies(reported.get("version") or "", r) for r in versions):
            return True
    return False


def _process_ok(resp: dict | None, hashes, signers) -> bool:
    if not resp or not resp.get("isRunning"):
        return False
    if hashes and resp.get("hash") not in {clean_hex(h) for h in hashes}:
        return False
    if signers:
        want = {clean_hex(s) for s in signers}
        if not want.intersection(resp.get("signerFingerprints") or ()):
            return False
    return True


def _mfa_timeout(check: dict, subj: Subject) -> int:
    """Seconds left before the check times out: -1 without timeout, 0 when never passed."""
    timeout = check["timeout_seconds"] if check["timeout_seconds"] is not None else NO_TIMEOUT
    if timeout <= 0:
        return NO_TIMEOUT
    passed = subj.mfa_passed_at()
    if passed is None:
        return 0
    if check["ignore_legacy_endpoints"] and subj.legacy_sdk():
        return NO_TIMEOUT
    now = clock.now()
    left = max(0, timeout - int((now - passed).total_seconds()))
    sess = subj.session
    for flag, at in ((check["prompt_on_wake"], sess.woken_at), (check["prompt_on_unlock"], sess.unlocked_at)):
        if flag and at:
            event = clock.parse(at)
            if event > passed:  # an event after the last MFA pass: only the grace remains
                left = min(left, max(0, int((event - now).total_seconds()) + GRACE_SECONDS))
    return left


def _prompt_passed(flag, at: str | None, passed: dt.datetime | None) -> bool:
    if not flag:
        return True
    if passed is None:
        return False
    if at is None:
        return True
    event = clock.parse(at)
    return event < passed or (clock.now() - event).total_seconds() < GRACE_SECONDS


def _mfa_passes(check: dict, subj: Subject) -> bool:
    passed = subj.mfa_passed_at()
    if passed is None:
        return False
    if _mfa_timeout(check, subj) == 0:
        return False
    sess = subj.session
    return _prompt_passed(check["prompt_on_wake"], sess.woken_at, passed) and _prompt_passed(
        check["prompt_on_unlock"], sess.unlocked_at, passed
    )


def _domain_passes(check: dict, subj: Subject) -> bool:
    domain = (subj.state.domain or {}).get("domain")
    return domain is not None and domain.lower() in {d.lower() for d in _json(check["domains"]) or ()}


def _mac_passes(check: dict, subj: Subject) -> bool:
    listed = {clean_hex(m) for m in _json(check["mac_addresses"]) or ()}
    return bool(listed.intersection((subj.state.mac or {}).get("addresses") or ()))


def _process_passes(check: dict, subj: Subject) -> bool:
    proc = _json(check["process"]) or {}
    signer = proc.get("signerFingerprint")
    return _process_ok(subj.state.processes.get(check["id"]), proc.get("hashes"), [signer] if signer else None)


def _processes_pass(check: dict, subj: Subject) -> bool:
    results = [
        bool(p.get("path"))
        and _process_ok(subj.state.by_path.get(p.get("path")), p.get("hashes"), p.get("signerFingerprints"))
        for p in _json(check["processes"]) or ()
    ]
    if check["semantic"] == "AnyOf":
        return any(results)
    return bool(results) and all(results)


def passes(check: dict, subj: Subject) -> bool:
    ev = TYPES.get(check["type_id"])
    return ev is not None and ev.passes(check, subj)


def timeouts(check: dict, subj: Subject) -> tuple[int, int]:
    """``(timeout, timeoutRemaining)`` of a posture query: -1/-1 except for MFA with a timeout."""
    if check["type_id"] != "MFA" or (check["timeout_seconds"] or NO_TIMEOUT) <= 0:
        return NO_TIMEOUT, NO_TIMEOUT
    return check["timeout_seconds"], _mfa_timeout(check, subj)


# ------------------------------------------------------------------ wire shapes
def query(check: dict, subj: Subject, passing: bool) -> dict:
    """A ``postureQuery`` of a service's ``postureQueries``."""
    timeout, remaining = timeouts(check, subj)
    updated = check["updated_at"]
    out = {
        **env.base(check, "posture-checks"),
        "updatedAt": updated,
        "queryType": check["type_id"],
        "isPassing": passing,
        "timeout": timeout,
        "timeoutRemaining": remaining,
        "processes": None,
    }
    if check["type_id"] == "MFA":
        sess = subj.session
        out["updatedAt"] = max([updated] + [t for t in (sess.woken_at, sess.unlocked_at) if t])
        # the check's prompts, left out when false (upstream's promptGracePeriodSeconds is never filled)
        for name, column in (("promptOnWake", "prompt_on_wake"), ("promptOnUnlock", "prompt_on_unlock")):
            if check[column]:
                out[name] = True
    if remaining >= 0:   # when the query times out, as upstream: now plus what remains
        out["timeoutAt"] = clock.fmt(clock.now() + dt.timedelta(seconds=remaining))
    ev = TYPES.get(check["type_id"])
    if ev is not None and ev.query is not None:
        ev.query(check, out)
    return out


def _process_query(check: dict, out: dict) -> None:
    p = _json(check["process"]) or {}
    out["process"] = {"osType": p.get("osType"), "path": p.get("path")}


def _processes_query(check: dict, out: dict) -> None:
    out["processes"] = [{"osType": p.get("osType"), "path": p.get("path")} for p in _json(check["processes"]) or ()]


def _process_actual(resp: dict | None, path: str | None = None) -> dict:
    resp = resp or {}
    out = {
        "hash": resp.get("hash") or "",
        "isRunning": bool(resp.get("isRunning")),
        "signerFingerprints": resp.get("signerFingerprints") or [],
    }
    if path is not None:
        out["path"] = path
    return out


def failure(check: dict, subj: Subject) -> dict:
    """Why a check fails, in the shape of ``postureCheckFailure*`` (failed service requests)."""
    t = check["type_id"]
    out = {"postureCheckId": check["id"], "postureCheckName": check["name"], "postureCheckType": t}
    ev = TYPES.get(t)
    if ev is not None:
        ev.failure(check, subj, out)
    return out


def _os_failure(check: dict, subj: Subject, out: dict) -> None:
    os_ = subj.state.os or {}
    out["actualValue"] = {"type": os_.get("type") or "", "version": os_.get("version") or ""}
    out["expectedValue"] = _json(check["operating_systems"]) or []


def _domain_failure(check: dict, subj: Subject, out: dict) -> None:
    out["actualValue"] = (subj.state.domain or {}).get("domain") or ""
    out["expectedValue"] = _json(check["domains"]) or []


def _mac_failure(check: dict, subj: Subject, out: dict) -> None:
    out["actualValue"] = (subj.state.mac or {}).get("addresses") or []
    out["expectedValue"] = _json(check["mac_addresses"]) or []


def _process_failure(check: dict, subj: Subject, out: dict) -> None:
    out["actualValue"] = _process_actual(subj.state.processes.get(check["id"]))
    out["expectedValue"] = _json(check["process"]) or {}


def _processes_failure(check: dict, subj: Subject, out: dict) -> None:
    procs = _json(check["processes"]) or []
    out["semantic"] = check["semantic"]
    out["actualValue"] = [_process_actual(subj.state.by_path.get(p["path"]), p["path"]) for p in procs]
    out["expectedValue"] = procs


def _mfa_failure(check: dict, subj: Subject, out: dict) -> None:
    passed, sess = subj.mfa_passed_at(), subj.session
    remaining = _mfa_timeout(check, subj)
    out["actualValue"] = {
        "passedMfa": passed is not None,
        "timedOut": remaining == 0 and passed is not None,
        "passedOnWake": _prompt_passed(check["prompt_on_wake"], sess.woken_at, passed),
        "passedOnUnlock": _prompt_passed(check["prompt_on_unlock"], sess.unlocked_at, passed),
    }
    out["expectedValue"] = {
        "passedMfa": True,
        "timedOut": False,
        "passedOnWake": bool(check["prompt_on_wake"]),
        "passedOnUnlock": bool(check["prompt_on_unlock"]),
    }
    out["criteria"] = {
        "passedMfaAt": clock.fmt(passed),
        "timeoutSeconds": check["timeout_seconds"],
        "timeoutRemainingSeconds": remaining,
        "unlockedAt": sess.unlocked_at,
        "wokenAt": sess.woken_at,
    }


# ------------------------------------------------------------------ the posture check types
WIRE = {"operating_systems": "operatingSystems", "domains": "domains", "mac_addresses": "macAddresses",
        "process": "process", "processes": "processes", "semantic": "semantic"}
_MFA_FLAGS = (("promptOnWake", "prompt_on_wake"), ("promptOnUnlock", "prompt_on_unlock"),
              ("ignoreLegacyEndpoints", "ignore_legacy_endpoints"))


def _render_columns(row: dict, out: dict) -> None:
    for column in TYPES[row["type_id"]].columns:
        text = row[column]
        out[WIRE[column]] = msgspec.Raw(text) if text is not None and column != "semantic" else text


def _render_mfa(row: dict, out: dict) -> None:
    out["timeoutSeconds"] = row["timeout_seconds"]
    for wire, column in _MFA_FLAGS:
        if row[column]:
            out[wire] = True               # omitempty upstream: false is left out


# versions of the OSes the posture-check-types rows list (upstream's seed data)
_OS_VERSIONS = {
    "Windows": ["Vista", "7", "8", "10", "2000"],
    "Linux": ["4.14", "4.19", "5.4", "5.9"],
    "Android": ["9", "10", "11"],
    "macOS": ["10.15", "11.0"],
    "iOS": ["11", "12"],
}


@dataclass(frozen=True)
class PostureType:
    """One type of posture check. ``columns``: the posture_checks columns a check of it holds
    (the others stay null); ``required``: those a create/PUT must carry (non-empty for lists);
    ``passes``: whether a check of it passes for a subject; ``failure`` fills a failure record
    with what was expected and what was reported; ``query`` adds the type's own fields to its
    ``postureQuery``; ``name``/``oses``: its posture-check-types row (none for MFA, which
    upstream does not list; ``versions`` False lists the OSes without versions); ``render`` adds
    its fields to the management detail."""
    id: str
    columns: tuple[str, ...]
    required: tuple[str, ...]
    passes: Callable[[dict, Subject], bool]
    failure: Callable[[dict, Subject, dict], None]
    query: Callable[[dict, dict], None] | None = None
    name: str = ""
    oses: tuple[str, ...] = ()
    versions: bool = True
    render: Callable[[dict, dict], None] = _render_columns

    def operating_systems(self) -> list[dict]:
        return [{"type": n, "versions": _OS_VERSIONS[n] if self.versions else []} for n in self.oses]


TYPES = {t.id: t for t in (
    PostureType("OS", ("operating_systems",), ("operating_systems",), lambda check, subj: _os_passes(check, subj.state),
                _os_failure, name="Operating System Check", oses=("Windows", "Linux", "Android", "macOS", "iOS")),
    PostureType("PROCESS", ("process",), ("process",), _process_passes, _process_failure, _process_query,
                name="Process Check", oses=("Windows", "macOS", "Linux")),
    PostureType("DOMAIN", ("domains",), ("domains",), _domain_passes, _domain_failure,
                name="Windows Domain Check", oses=("Windows",)),
    PostureType("MAC", ("mac_addresses",), ("mac_addresses",), _mac_passes, _mac_failure,
                name="MAC Address Check", oses=("Windows", "Linux", "macOS", "Android")),
    PostureType("PROCESS_MULTI", ("processes", "semantic"), ("processes", "semantic"), _processes_pass,
                _processes_failure, _processes_query, name="Process Multi Check", oses=("Windows", "macOS", "Linux"),
                versions=False),
    PostureType("MFA", ("timeout_seconds", "prompt_on_wake", "prompt_on_unlock", "ignore_legacy_endpoints"), (),
                _mfa_passes, _mfa_failure, render=_render_mfa),
)}


# ------------------------------------------------------------------ service policies
class Evaluator:
    """Posture of the service policies linking one subject to services: each check is
    evaluated once per request, however many policies name it."""

    def __init__(self, ctl: PolicyController, identity_id: str, api_session_id: str | None):
        self.subject = Subject(ctl, identity_id, api_session_id)
        self._results: dict[str, bool] = {}

    def check(self, row: dict) -> bool:
        r = self._results.get(row["id"])
        if r is None:
            r = self._results[row["id"]] = passes(row, self.subject)
        return r

    def policy(self, checks: list[dict]) -> bool:
        return all([self.check(c) for c in checks])
