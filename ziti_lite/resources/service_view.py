"""The caller-dependent parts of a service detail: permissions, merged config, posture queries.

Used by the management and the client service details and lists. ``decorate`` fills one
rendered service; the values of a whole page are computed together (``prepare``, a handful of
queries for any number of services) by the list's prefetcher, which hands them to the page's
render hook, so a list costs the same few queries whatever its length. Who "the caller" is: the
session's identity, or on the management API the identity named by ``asIdentity``. Which config
types: the ``configTypes`` query parameter (client lists: repeated; management: comma-separated),
else the API session's.
"""

from __future__ import annotations

import functools
import json

import msgspec

from ..api import crud
from ..api.context import Ctx
from ..api.resource import Render, Resource, Row
from ..auth.sessions import resolve_config_types
from ..errors import NotFound
from ..policy import access, posture_checks
from ..policy.access import VISIBLE, has_posture_checks


# ------------------------------------------------------------------ the caller's view (decorate)
class View:
    """The caller-dependent values of the services of one request."""

    def __init__(self, ctx: Ctx):
        store = ctx.store
        sess = ctx.session
        self.identity_id = sess.identity_id if sess else None
        api_session_id = sess.id if sess else None
        named = ctx.q("asIdentity") if ctx.api == "management" else None
        if named:
            self.identity_id = as_identity(store, named)
            api_session_id = None
        self.detail = ctx.route.path.endswith("{id}")
        self.types = requested_types(ctx, sess)
        self.has_checks = has_posture_checks(store) if self.identity_id else False
        self.evaluator = (
            posture_checks.Evaluator(ctx.ctl, self.identity_id, api_session_id) if self.identity_id else None
        )
        self.values: dict[str, tuple] = {}

    def prepare(self, ctx: Ctx, rows: list[dict]) -> None:
        """Compute permissions, config and posture queries of ``rows`` in a few queries."""
        store = ctx.store
        rows = [r for r in rows if r["id"] not in self.values]
        if not rows:
            return
        ids = [r["id"] for r in rows]
        by_service: dict[str, list[dict]] = {}
        if self.identity_id:
            for p in access.policies(store, self.identity_id, ids):
                by_service.setdefault(p["service_id"], []).append(p)
        checks = (
            access.policy_checks(store, [p["policy_id"] for ps in by_service.values() for p in ps])
            if self.has_checks and by_service
            else {}
        )
        configs = self._configs(store, rows)
        for row in rows:
            sid = row["id"]
            pols = by_service.get(sid, [])
            kinds = {p["type"] for p in pols}
            perms = [k for k in ("Bind", "Dial") if k in kinds] or (["Invalid"] if self.identity_id else [])
            if not self.has_checks or not pols:
                queries = [
                    {
                        "policyId": f"dummy {p.lower()} policy: no posture checks defined",
                        "policyType": p,
                        "isPassing": True,
                        "postureQueries": [],
                    }
                    for p in perms
                ]
            else:
                queries = []
                evaluator = self.evaluator
                assert evaluator is not None  # has_checks is only true with an identity
                for p in pols:
                    items = [(c, evaluator.check(c)) for c in checks.get(p["policy_id"], ())]
                    queries.append(
                        {
                            "policyId": p["policy_id"],
                            "policyType": p["type"],
                            "isPassing": all(ok for _, ok in items),
                            "postureQueries": [posture_checks.query(c, evaluator.subject, ok) for c, ok in items],
                        }
                    )
            config: dict | None
            if self.types is None:  # nothing asked for: details show null, lists an empty map
                config = None if self.detail else {}
            else:
                config = configs.get(sid, {})
            self.values[sid] = (perms, config, queries)

    def _configs(self, store, rows: list[dict]) -> dict[str, dict]:
        """Merged ``config`` per service: the service's configs of the requested types, then the
        identity's overrides of those types, keyed by config type name."""
        if not self.types or not rows:
            return {}
        wants_all = self.types == ["all"]
        wanted = set(self.types)
        own = {r["id"]: _ids(r["configs"]) for r in rows}
        config_ids = sorted({c for ids in own.values() for c in ids})
        found = {}
        if config_ids:
            for c in store.all(
                "SELECT c.id, c.config_type_id AS type_id, ct.name AS type_name, c.data FROM configs c"
                " JOIN config_types ct ON ct.id = c.config_type_id"
                " WHERE c.id IN (SELECT value FROM json_each(?))",
                (json.dumps(config_ids),),
            ):
                found[c["id"]] = c
        overrides: dict[str, list[dict]] = {}
        if self.identity_id:
            for o in store.all(
                "SELECT x.service_id, x.config_type_id AS type_id, ct.name AS type_name, c.data"
                " FROM identity_service_configs x JOIN configs c ON c.id = x.config_id"
                " JOIN config_types ct ON ct.id = x.config_type_id"
                " WHERE x.identity_id = ? AND x.service_id IN (SELECT value FROM json_each(?))",
                (self.identity_id, json.dumps([r["id"] for r in rows])),
            ):
                overrides.setdefault(o["service_id"], []).append(o)
        out = {}
        for r in rows:
            merged: dict[str, dict] = {}
            for cid in own[r["id"]]:
                c = found.get(cid)
                if c is not None and (wants_all or c["type_id"] in wanted):
                    merged[c["type_id"]] = c
            for o in overrides.get(r["id"], ()):
                if wants_all or o["type_id"] in wanted:
                    merged[o["type_id"]] = o
            out[r["id"]] = {
                c["type_name"]: msgspec.Raw(c["data"]) for c in sorted(merged.values(), key=lambda c: c["type_name"])
            }
        return out


_ids = msgspec.json.Decoder(list[str]).decode


def as_identity(store, value: str) -> str:
    found = store.value(
        "SELECT id FROM identities WHERE id = ? OR name = ? ORDER BY id = ? DESC LIMIT 1", (value, value, value)
    )
    if found is None:
        raise NotFound("identity", value)
    return found


def requested_types(ctx: Ctx, sess) -> list[str] | None:
    """Config type ids (or ``["all"]``) the request asks for; None when it asks for none."""
    store = ctx.store
    requested: list[str] | str | None
    if ctx.api == "client":
        given = ctx.qlist("configTypes") if not ctx.route.path.endswith("{id}") else []
        requested = given or None
    else:
        requested = ctx.q("configTypes") or None
    if requested is not None:
        return resolve_config_types(store, requested)
    if sess is None:
        return None
    text = store.value("SELECT config_types FROM api_sessions WHERE id = ?", (sess.id,))
    types = json.loads(text) if text else []
    return types or None


def prefetch(ctx: Ctx, rows: list[Row]) -> Render:
    """The services list's prefetcher (registered by services.py): the caller's view of the
    page's services, computed together; the page's rows are decorated from it."""
    v = View(ctx)
    v.prepare(ctx, rows)
    return functools.partial(decorate, view=v)


def decorate(ctx: Ctx, row: Row, out: dict, view: View | None = None) -> None:
    """The services' render hook: the caller's view of one service, from the page's ``view``
    (see ``prefetch``) or, for a service rendered alone, its own."""
    v = view or View(ctx)
    if row["id"] not in v.values:
        v.prepare(ctx, [row])
    perms, config, queries = v.values[row["id"]]
    out["permissions"] = perms
    out["config"] = config
    # association lists (a policy's, a config's, an identity's services) render no posture
    # queries, as upstream
    out["postureQueries"] = queries if ctx.route.path.startswith("/services") else []


def _as_identity_condition(ctx: Ctx):
    """The management API's ``GET /services`` as upstream lists it: for ``asIdentity``, or else
    for a caller that reads through its policies (``policy_reader``); a caller that reads by
    permission (OpenZiti 2.0's ``service.read``, ``admin_readonly``) sees every service, as
    v2.0.3's management access does; with ``roleFilter`` upstream lists by roles alone."""
    if ctx.api != "management" or ctx.route.path != "/services":
        return None
    value = ctx.q("asIdentity")
    if value:
        identity_id: str | None = as_identity(ctx.store, value)
        if ctx.store.value("SELECT is_admin FROM identities WHERE id = ?", (identity_id,)):  # as upstream
            return None
    elif ctx.q("roleFilter"):
        return None
    else:
        identity_id = policy_reader(ctx)
    return None if identity_id is None else (VISIBLE, [identity_id])


def policy_reader(ctx: Ctx) -> str | None:
    """The caller's identity where the management API shows it services through its policies
    alone: an identity that reads as an admin without being ``isAdmin`` (the default admin
    demoted to ``isAdmin: false``), as v1.3.3 shows them; None where it sees every service."""
    session = ctx.session
    if ctx.api != "management" or session is None or session.permissions:
        return None
    if ctx.store.value("SELECT is_admin FROM identities WHERE id = ?", (session.identity_id,)):
        return None
    return session.identity_id


def guard_detail(ctx: Ctx, row: Row) -> None:
    """A service's detail for a policy reader: upstream answers 404 for one its policies do not give it."""
    identity_id = policy_reader(ctx)
    if identity_id is not None and not ctx.store.value(
            f"SELECT 1 FROM services t WHERE t.id = ? AND {VISIBLE}", (row["id"], identity_id)):
        raise NotFound("service", row["id"])


def install_list_condition(services: Resource) -> None:
    """Add the asIdentity restriction to the services list's conditions (after those already there)."""
    if _as_identity_condition not in crud.LIST_CONDITIONS.get(services, ()):
        crud.list_condition(services)(_as_identity_condition)
