"""What the controller is made of: every module that registers something when imported, in one list.

Operations (``@op``), CRUD listeners (``crud.listen``), list prefetchers (``crud.prefetch``), list
conditions (``crud.list_condition``), integrity checks (``integrity.check``), login methods and
auth-query providers (``auth.methods``) and the resource collections (a module's ``RESOURCES``)
are all registered by importing the module that declares them. ``load()`` imports every module
of ``MODULES`` and returns the route table built from what they registered; the controller
(``app.Controller``) and every CLI command go through it, so a registration is never missing
because some code path happened not to import its module. ``tests/test_wiring.py`` checks that
every registered function comes from a module listed here.

``ziti-lite routes`` prints the route table: method, path, API, auth level, handler;
``ziti-lite hooks`` prints the write path: per resource, what runs on create, update, delete and
list, read from the same registries the handlers run (``hooks()``).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from . import integrity, permissions
from .api import crud, ops, routes
from .api.resource import Resource
from .api.router import Route, Router

# (module, what importing it registers), in load order. Resources first: their generic CRUD
# routes come before the hand-written operations in the route table.
MODULES: tuple[tuple[str, str], ...] = (
    # --- resource collections (each module's RESOURCES get list/create/detail/update/patch/delete)
    ("ziti_lite.resources.identities", "identity-types, identities, authenticators, api-sessions; ops:"
                                       " disable, enable, trace; the identities list prefetcher"),
    ("ziti_lite.resources.services", "config-types, configs, services"),
    ("ziti_lite.resources.auth", "auth-policies, external-jwt-signers, controllers; ops: the client's signer"
                                 " list, /identities/{id}/authenticators"),
    ("ziti_lite.resources.cas_enrollments", "cas, enrollments; ops: POST /enrollments, refresh,"
                                            " /identities/{id}/enrollments"),
    ("ziti_lite.resources.routers", "edge-routers, routers, transit-routers, terminators; op: re-enroll;"
                                    " listener on services"),
    ("ziti_lite.resources.posture", "posture-check-types, posture-checks"),
    ("ziti_lite.resources.policies", "service-policies, edge-router-policies, service-edge-router-policies"),
    ("ziti_lite.resources.revocations", "revocations (OpenZiti 2.0); listener: an identity deleted or disabled"
                                        " is revoked"),
    ("ziti_lite.resources.service_view", "the services list's asIdentity condition (installed by client.services)"),
    # --- the policy engine's hooks
    ("ziti_lite.policy.links", "listeners: membership of policies kept in step with every entity write"),
    ("ziti_lite.policy.checks", "integrity checks of the derived policy tables"),
    # --- hand-written operations and hooks (ziti_lite.handlers), the policy endpoints first
    ("ziti_lite.handlers.tunneler", "listener: tunneler-enabled edge routers get a Router identity and policy"),
    ("ziti_lite.handlers.relations", "ops: the relationship lists (/identities/{id}/services, ...)"),
    ("ziti_lite.handlers.roles", "ops: role-attribute lists; list conditions: roleFilter/roleSemantic"),
    ("ziti_lite.handlers.advice", "op: /identities/{id}/policy-advice/{serviceId}"),
    ("ziti_lite.handlers.service_configs", "ops: /identities/{id}/service-configs"),
    # --- management and shared operations
    ("ziti_lite.handlers.informational", "ops: /version, /, /specs, /.well-known/est/cacerts, /network-jwts,"
                                        " /summary"),
    ("ziti_lite.handlers.authentication", "ops: /authenticate, /current-api-session, /current-identity;"
                                          " method password"),
    ("ziti_lite.handlers.mfa", "ops: TOTP enrollment and /authenticate/mfa; the TOTP auth query"),
    ("ziti_lite.handlers.enrollment", "ops: /enroll*, authenticator re-enroll/extend, CA verify; method cert;"
                                      " listener on cas"),
    ("ziti_lite.auth.extjwt", "method ext-jwt; the EXT-JWT auth query"),
    ("ziti_lite.handlers.settings", "ops: /controller-settings (in upstream's spec, answered 501 as upstream)"),
    ("ziti_lite.handlers.database", "ops: /database/* (integrity check and fix, snapshot)"),
    ("ziti_lite.integrity", "integrity checks of foreign keys and search indexes"),
    # --- the fabric management API (/fabric/v1)
    ("ziti_lite.fabric.entities", "ops: the fabric's routers, services, terminators (lists, details, sub-lists)"),
    ("ziti_lite.fabric.live", "ops: the fabric's links and circuits (the control channel's live tables)"),
    # --- the client API
    ("ziti_lite.client.services", "ops: the client's /services; installs the asIdentity list condition"),
    ("ziti_lite.client.sessions", "ops: /sessions"),
    ("ziti_lite.client.caller", "ops: /current-identity/edge-routers, /current-api-session/*, /protocols"),
    ("ziti_lite.client.posture", "ops: /posture-response*, posture data, failed service requests"),
    ("ziti_lite.client.changes", "listeners: service-change stamps for /current-api-session/service-updates"),
    # --- events and audit (ziti-lite's own /ziti-lite/v1 namespace)
    ("ziti_lite.events.changes", "listener on every resource: entityChange events, the audit trail's before/after"),
    ("ziti_lite.events.audit", "after-change hook and login outcomes: audit rows, authentication events;"
                               " op: /ziti-lite/v1/audit; integrity check of audit rows"),
    ("ziti_lite.events.stream", "ops: /ziti-lite/v1/events (server-sent events), /ziti-lite/v1/events/tickets"),
    ("ziti_lite.events.wsapi", "websocket: /fabric/v1/ws-api (the stream `ziti fabric stream events` reads)"),
)


@dataclass(frozen=True)
class Wiring:
    modules: tuple[ModuleType, ...]
    resources: tuple[Resource, ...]     # every collection with generic CRUD routes
    routes: tuple[Route, ...]           # the whole route table, in mount order


@functools.cache
def load() -> Wiring:
    """Import every module of ``MODULES`` (once per process) and build the route table."""
    modules = tuple(importlib.import_module(name) for name, _ in MODULES)
    resources = tuple(r for m in modules for r in getattr(m, "RESOURCES", ()))
    table = [r for res in resources for r in routes.resource_routes(res)] + list(ops.OPS)
    return Wiring(modules, resources, tuple(table))


@functools.cache
def router() -> Router:
    """The route trie of ``load().routes``, built once per process: every ``Controller`` shares it
    (nothing adds routes after start)."""
    trie = Router()
    for route in load().routes:
        trie.add(route)
    return trie


def resources() -> tuple[Resource, ...]:
    return load().resources


def resource(name: str) -> Resource:
    for r in load().resources:
        if r.name == name:
            return r
    raise KeyError(name)


def handler_name(route: Route) -> str:
    """``module:function`` of what answers a route: the generic CRUD handler with its resource,
    a handler made by a factory function as ``factory(operation id)``."""
    fn = route.handler
    if isinstance(fn, functools.partial):
        inner = fn.func
        return f"{inner.__module__}:{inner.__qualname__}({route.resource.name})"
    name = fn.__qualname__
    if ".<locals>." in name:
        return f"{fn.__module__}:{name.split('.<locals>.')[0]}({route.op_id})"
    return f"{fn.__module__}:{name}"


def describe() -> Iterator[tuple[str, str, str, str, str, str]]:
    """(method, path, api, auth level, permission, handler) of every route, sorted by path,
    method, api. The permission of an admin-level route is the (entity.action) it needs
    (``permissions.py``: granted by it, its entity, or ``admin_readonly`` for reads), or
    ``admin`` for admins only; other levels need none (``-``)."""
    rows = [(r.method, r.path, r.api, r.auth, permissions.label(r.perm) if r.auth == "admin" else "-",
             handler_name(r)) for r in load().routes]
    yield from sorted(rows, key=lambda row: (row[1], row[0], row[2]))


def callable_name(fn: Any) -> str:
    """``module:qualname`` of a registered function (of the function a partial wraps)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return f"{fn.__module__}:{fn.__qualname__}"


def hooks(resource: Resource) -> dict[str, list[tuple[str, str]]]:
    """What runs, in order, when the generic handlers of ``resource`` create, update (PUT and
    PATCH), delete and list: {operation: [(step, module:function)]}, only the operations the
    resource mounts. Read from the registries ``api/crud.py`` and ``app.Controller`` run."""
    listeners = [callable_name(fn) for fn in crud.LISTENERS.get(resource, ())]
    every = [callable_name(fn) for fn in crud.ANY_LISTENERS]
    after = [callable_name(fn) for fn in ops.AFTER_CHANGE]

    def write(first: str) -> list[tuple[str, str]]:
        hook = getattr(resource, first)
        steps = [(first, callable_name(hook))] if hook else []
        if resource.after_write:
            steps.append(("after_write", callable_name(resource.after_write)))
        steps += [("listener", n) for n in listeners] + [("listener of every resource", n) for n in every]
        return steps + [("after the request", n) for n in after]

    out: dict[str, list[tuple[str, str]]] = {}
    if "create" in resource.ops:
        out["create"] = write("prepare")
    if "update" in resource.ops or "patch" in resource.ops:
        out["update"] = write("prepare")
    if "delete" in resource.ops:
        steps = write("before_delete")
        at = 1 if resource.before_delete else 0   # the children go after the hook, before the row
        steps[at:at] = [(f"deletes first: {child.name}", f"{child.table}.{column}")
                        for child, column in crud.CASCADES.get(resource, ())]
        out["delete"] = steps
    if "list" in resource.ops:
        steps = [("list condition", callable_name(fn)) for fn in crud.LIST_CONDITIONS.get(resource, ())]
        if resource in crud.PREFETCH:
            steps.append(("prefetch", callable_name(crud.PREFETCH[resource])))
        if resource.render:
            steps.append(("render", callable_name(resource.render)))
        out["list"] = steps
    if "detail" in resource.ops and (resource.render or resource.before_read):
        out["detail"] = [(step, callable_name(fn)) for step, fn in (("before_read", resource.before_read),
                                                                    ("render", resource.render)) if fn]
    return out


def integrity_checks() -> list[str]:
    """``module:function`` of every integrity check ``ziti-lite check`` and ``/database/*`` run."""
    load()
    return [callable_name(fn) for fn in (*integrity.CHECKS, integrity.foreign_keys)]
