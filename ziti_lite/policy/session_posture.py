"""Whether a session may be had, or kept, as far as posture goes: which of an identity's service
policies of a type pass their posture checks for a service, and the sessions whose policies no
longer do. ``client/sessions.py`` asks it when a session is created (and answers
``INVALID_POSTURE``), ``client/posture.py`` after a posture response, and the janitor's sweep as
time passes (MFA timeouts). The checks themselves are ``posture_checks.py``'s.
"""

from __future__ import annotations

from . import access, posture_checks
from .posture_checks import PolicyController


class PostureResult:
    def __init__(self) -> None:
        self.passing: list[str] = []
        self.failed: dict[str, tuple[str, list[dict]]] = {}   # policy id -> (name, failed checks)

    @property
    def passed(self) -> bool:
        return bool(self.passing) or not self.failed


def evaluate(ctl: PolicyController, identity_id: str, api_session_id: str, service_id: str, kind: str,
             evaluator: posture_checks.Evaluator | None = None) -> PostureResult:
    """Which of the identity's policies of type ``kind`` for the service pass their posture
    checks. With no posture check in the system nothing is evaluated (and none is listed)."""
    store = ctl.store
    result = PostureResult()
    if not access.has_posture_checks(store):
        return result
    pols = [p for p in access.policies(store, identity_id, [service_id]) if p["type"] == kind]
    checks = access.policy_checks(store, [p["policy_id"] for p in pols])
    ev = evaluator or posture_checks.Evaluator(ctl, identity_id, api_session_id)
    for p in pols:
        bad = [c for c in checks.get(p["policy_id"], ()) if not ev.check(c)]
        if bad:
            result.failed[p["policy_id"]] = (p["name"], bad)
        else:
            result.passing.append(p["policy_id"])
    return result


def revoke_failing(ctl: PolicyController, identity_id: str | None = None) -> int:
    """Delete sessions (of one identity, or all) whose policies' posture no longer passes.
    Only sessions of services that posture checks apply to are looked at."""
    store = ctl.store
    if not access.has_posture_checks(store):
        return 0
    sql = ("SELECT s.id, s.identity_id, s.api_session_id, s.service_id, s.type FROM sessions s"
           " WHERE EXISTS (SELECT 1 FROM service_policy_services ps JOIN service_policy_posture_checks pc"
           " ON pc.policy_id = ps.policy_id WHERE ps.service_id = s.service_id)")
    rows = store.all(sql + (" AND s.identity_id = ?" if identity_id else ""), (identity_id,) if identity_id else ())
    evaluators: dict[tuple, posture_checks.Evaluator] = {}
    doomed = []
    for r in rows:
        key = (r["identity_id"], r["api_session_id"])
        ev = evaluators.get(key)
        if ev is None:
            ev = evaluators[key] = posture_checks.Evaluator(ctl, *key)
        if not evaluate(ctl, r["identity_id"], r["api_session_id"], r["service_id"], r["type"], ev).passed:
            doomed.append((r["id"],))
    if doomed:
        with store.write():
            store.executemany("DELETE FROM sessions WHERE id = ?", doomed)
    return len(doomed)
