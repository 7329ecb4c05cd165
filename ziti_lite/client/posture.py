"""Posture responses from SDKs and what the management API shows of them.

* ``POST /posture-response`` (one object) and ``/posture-response-bulk`` (an array), types
  ``OS``, ``DOMAIN``, ``MAC``, ``PROCESS`` and ``ENDPOINT_STATE``; stored in memory per identity
  (``posture_checks.PostureState``). A change moves the identity's ``lastChangeAt`` and ends
  the identity's sessions that no longer pass their policies' posture checks.
* ``GET /identities/{id}/posture-data`` and ``/failed-service-requests`` (management): an
  admin reads anyone's, an identity only its own (404 otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from .. import clock
from ..api import envelope as env
from ..api.context import Ctx
from ..api.ops import op
from ..errors import ApiError, CouldNotValidate, generic_cause
from ..policy import posture_checks, session_posture
from ..policy.posture_checks import PostureState, SessionPosture, clean_hex, state
from . import changes, sessions

if TYPE_CHECKING:
    from .sessions import ClientController

STRINGS = ("id", "typeId", "type", "version", "build", "domain", "path", "hash")


def _validate(item: Any, index: int | None) -> dict:
    where = "" if index is None else f"[{index}]"
    if not isinstance(item, dict):
        raise CouldNotValidate(f"body{where}", "a posture response must be an object", item)
    for key in ("id", "typeId"):
        if not isinstance(item.get(key), str) or (key == "typeId" and not item[key]):
            raise CouldNotValidate(f"{key}{where}", f"{key} in body is required", item.get(key))
    t = item["typeId"]
    kind = RESPONSES.get(t)
    if kind is None:
        raise CouldNotValidate(f"typeId{where}", f"typeId in body should be one of {list(RESPONSES)}", t)
    for key in kind.required:
        if item.get(key) is None:
            raise CouldNotValidate(f"{key}{where}", f"{key} in body is required", None)
    for key in STRINGS:
        if key in item and item[key] is not None and not isinstance(item[key], str):
            raise CouldNotValidate(f"{key}{where}", f"{key} in body must be of type string", item[key])
    for key in ("macAddresses", "signerFingerprints"):
        v = item.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            raise CouldNotValidate(f"{key}{where}", f"{key} in body must be of type array of strings", v)
    for key in ("isRunning", "woken", "unlocked"):
        if key in item and item[key] is not None and not isinstance(item[key], bool):
            raise CouldNotValidate(f"{key}{where}", f"{key} in body must be of type boolean", item[key])
    return item


# ---------------------------------------------------------------- what each response type stores
def _apply_os(st: PostureState, api_session_id: str, item: dict, now: str) -> bool:
    new = {"type": item["type"], "version": item["version"], "build": item.get("build") or ""}
    changed = st.os is None or {k: st.os[k] for k in new} != new
    st.os = {**new, "postureCheckId": item["id"], "lastUpdatedAt": now}
    return changed


def _apply_domain(st: PostureState, api_session_id: str, item: dict, now: str) -> bool:
    changed = (st.domain or {}).get("domain") != item["domain"]
    st.domain = {"domain": item["domain"], "postureCheckId": item["id"], "lastUpdatedAt": now}
    return changed


def _apply_mac(st: PostureState, api_session_id: str, item: dict, now: str) -> bool:
    addresses = [clean_hex(m) for m in item["macAddresses"]]
    changed = (st.mac or {}).get("addresses") != addresses
    st.mac = {"addresses": addresses, "postureCheckId": item["id"], "lastUpdatedAt": now}
    return changed


def _apply_process(st: PostureState, api_session_id: str, item: dict, now: str) -> bool:
    cid = item["id"]
    resp = {"postureCheckId": cid, "path": item.get("path") or "", "isRunning": bool(item.get("isRunning")),
            "hash": clean_hex(item.get("hash")),
            "signerFingerprints": [clean_hex(s) for s in item.get("signerFingerprints") or ()],
            "lastUpdatedAt": now}
    old = st.processes.get(cid)
    changed = old is None or {k: v for k, v in old.items() if k != "lastUpdatedAt"} != \
        {k: v for k, v in resp.items() if k != "lastUpdatedAt"}
    st.processes[cid] = resp
    if resp["path"]:
        st.by_path[resp["path"]] = resp
    return changed


def _apply_endpoint_state(st: PostureState, api_session_id: str, item: dict, now: str) -> bool:
    sess = st.sessions.setdefault(api_session_id, SessionPosture())
    if item.get("woken"):
        sess.woken_at = now
    if item.get("unlocked"):
        sess.unlocked_at = now
    return bool(item.get("woken") or item.get("unlocked"))


class ResponseType(NamedTuple):
    required: tuple[str, ...]     # fields a response of the type must carry (upstream: 400 without)
    apply: Callable[[PostureState, str, dict, str], bool]   # store it; True when it changed something


# the posture response types an SDK sends, in upstream's order (the checks they answer are
# posture_checks.TYPES; ENDPOINT_STATE answers the wake/unlock prompts of MFA checks)
RESPONSES: dict[str, ResponseType] = {
    "OS": ResponseType(("type", "version"), _apply_os),
    "DOMAIN": ResponseType(("domain",), _apply_domain),
    "MAC": ResponseType(("macAddresses",), _apply_mac),
    "PROCESS": ResponseType((), _apply_process),
    "ENDPOINT_STATE": ResponseType((), _apply_endpoint_state),
}


def apply(ctl: ClientController, identity_id: str, api_session_id: str, item: dict) -> bool:
    """Store one response; True when it changed what is known."""
    st = state(ctl, identity_id)
    now = clock.stamp()
    changed = RESPONSES[item["typeId"]].apply(st, api_session_id, item, now)
    if changed:
        st.changed_at = now
    return changed


def _mfa_prompts(ctx: Ctx, woken: bool, unlocked: bool) -> list[dict]:
    """Services whose MFA checks prompt on this wake/unlock, for an API session that passed MFA."""
    if not (woken or unlocked):
        return []
    if posture_checks.Subject(ctx.ctl, ctx.identity_id, ctx.api_session.id).mfa_passed_at() is None:
        return []
    flags = [c for c, on in (("c.prompt_on_wake = 1", woken), ("c.prompt_on_unlock = 1", unlocked)) if on]
    rows = ctx.store.all(
        "SELECT DISTINCT sv.id, sv.name, c.timeout_seconds FROM service_policy_identities i"
        " JOIN service_policy_services s ON s.policy_id = i.policy_id"
        " JOIN service_policy_posture_checks pc ON pc.policy_id = i.policy_id"
        " JOIN posture_checks c ON c.id = pc.posture_check_id AND c.type_id = 'MFA'"
        " JOIN services sv ON sv.id = s.service_id"
        f" WHERE i.identity_id = ? AND ({' OR '.join(flags)}) ORDER BY sv.name, sv.id", (ctx.identity_id,))
    return [{"id": r["id"], "name": r["name"], "postureQueryType": "MFA", "timeout": r["timeout_seconds"],
             "timeoutRemaining": posture_checks.GRACE_SECONDS} for r in rows]


async def _respond(ctx: Ctx, items: list[dict]):
    changed = False
    for item in items:
        changed = apply(ctx.ctl, ctx.identity_id, ctx.api_session.id, item) or changed
    if changed:
        changes.memory_bump(ctx.ctl, ctx.identity_id)
        with ctx.store.write():
            session_posture.revoke_failing(ctx.ctl, identity_id=ctx.identity_id)
    sessions.ensure_sweeper(ctx.ctl)
    states = [i for i in items if i["typeId"] == "ENDPOINT_STATE"]
    services = _mfa_prompts(ctx, any(i.get("woken") for i in states), any(i.get("unlocked") for i in states))
    return env.ok({"services": services}, status=201)


@op("POST", "/posture-response", apis=("client",), auth="session", op_id="createPostureResponse",
    tag="posture-checks")
async def posture_response(ctx: Ctx):
    body = await ctx.json_any()
    return await _respond(ctx, [_validate(body, None)])


@op("POST", "/posture-response-bulk", apis=("client",), auth="session", op_id="createPostureResponseBulk",
    tag="posture-checks")
async def posture_response_bulk(ctx: Ctx):
    if not (await ctx.body()).strip():  # upstream: the array is a required body
        raise CouldNotValidate("body", "body in body is required", None)
    body = await ctx.json_any()
    if not isinstance(body, list):
        cause = generic_cause("expected an array of posture responses")
        raise ApiError("COULD_NOT_PARSE_BODY", cause=cause)
    return await _respond(ctx, [_validate(item, i) for i, item in enumerate(body)])


# ------------------------------------------------------------------ management views
def _identity(ctx: Ctx) -> str:
    return ctx.params["id"]


def _slot(data: dict | None, **values) -> dict:
    data = data or {}
    out = {
        "postureCheckId": data.get("postureCheckId", ""),
        "timedOut": False,
        "lastUpdatedAt": data.get("lastUpdatedAt"),
    }
    for key, source in values.items():
        out[key] = data.get(source) if data else None
    return out


# admin operations, as every management operation upstream: a non-admin gets 401
@op("GET", "/identities/{id}/posture-data", op_id="getIdentityPostureData", tag="identities", perm=("identity", "read"))
async def posture_data(ctx: Ctx):
    id = _identity(ctx)
    st = posture_checks.states(ctx.ctl).get(id) or posture_checks.EMPTY
    processes = []
    for p in st.processes.values():
        item = {
            "postureCheckId": p["postureCheckId"],
            "timedOut": False,
            "lastUpdatedAt": p["lastUpdatedAt"],
            "signerFingerprints": p["signerFingerprints"] or None,
        }
        if p["isRunning"]:
            item["isRunning"] = True
        if p["hash"]:
            item["binaryHash"] = p["hash"]
        processes.append(item)
    os_ = _slot(st.os, type="type", version="version")
    os_["build"] = None  # never mapped upstream
    sessions = {}
    for r in ctx.store.all(
        "SELECT s.id, i.sdk_info FROM api_sessions s JOIN identities i ON i.id = s.identity_id"
        " WHERE s.identity_id = ? ORDER BY s.created_at, s.id",
        (id,),
    ):
        sp = st.sessions.get(r["id"]) or SessionPosture()
        passed = posture_checks.Subject(ctx.ctl, id, r["id"]).mfa_passed_at()
        sessions[r["id"]] = {
            "mfa": {
                "apiSessionId": r["id"],
                "passedMfa": passed is not None,
                "passedAt": None,
                "passedOnWake": None,
                "passedOnUnlock": None,
            },
            "endpointState": {"wokenAt": sp.woken_at, "unlockedAt": sp.unlocked_at},
            "sdkInfo": msgspec.Raw(r["sdk_info"] or "{}"),
        }
    return env.ok(
        {
            "mac": _slot(st.mac, addresses="addresses"),
            "domain": _slot(st.domain, domain="domain"),
            "os": os_,
            "processes": processes,
            "apiSessionPostureData": sessions,
        }
    )


@op(
    "GET",
    "/identities/{id}/failed-service-requests",
    op_id="getIdentityFailedServiceRequests",
    tag="identities",
    perm=("identity", "read"),
)
async def failed_service_requests(ctx: Ctx):
    id = _identity(ctx)
    st = posture_checks.states(ctx.ctl).get(id) or posture_checks.EMPTY
    return env.ok(list(st.failures))

