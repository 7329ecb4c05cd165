"""Carrying out a plan through the management API, and the ``apply`` / ``test`` workflows.

On a database file (``exchange.LocalApi``) the whole change runs inside one outer
``Store.write()`` transaction: each API request's own write becomes a savepoint, the policy
assertions are evaluated inside it on the network as it will be, and any failure (a refused
write, a failed assertion, a dry run) rolls everything back. A running server beside it sees
the commit at once (its caches watch ``PRAGMA data_version``).

On a running controller (``remote.RemoteApi``) writes cannot be rolled back, so the plan is
first rehearsed on a scratch ziti-lite loaded with an export of the live network
(``scratch.py``): the API's validation and the assertions run there, and only a change that
passes them is written; a write the controller still refuses stops the run with what was and
was not done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import exchange
from ..edge.entity import STATE_KEY
from . import assertions, plan, remote, scratch
from .document import NetcodeError, Network

Say = Callable[[str], None]


class Refused(NetcodeError):
    """A write the API refused, with what was done before it."""


class _Rollback(Exception):
    pass


@dataclass
class Outcome:
    changes: list[plan.Change]
    failures: list[str] = field(default_factory=list)
    applied: bool = False


# the kinds a file's tests are evaluated over: who may dial or bind what, through which routers
TESTED = ("identities", "services", "edgeRouters", "postureChecks", "servicePolicies", "edgeRouterPolicies",
          "serviceEdgeRouterPolicies")


def reads(network: Network) -> tuple[str, ...]:
    """The kinds a run over ``network`` reads: the file's own, those its entities may name, and
    with tests the whole policy picture. Nothing else is listed, so a least-privilege identity
    needs read permission on these only (and write permission on the kinds it changes)."""
    return exchange.needed([*network.entities, *(TESTED if network.tests else ())])


def network_names(api: exchange.ApiBase, kinds=None) -> dict[str, dict[str, str]]:
    """collection -> {name: id} of every entity the file may refer to (of ``kinds``: default
    all), built-ins included."""
    return {exchange.COLLECTION[kind]: {e["name"]: e["id"] for e in api.list(exchange.COLLECTION[kind])}
            for kind in (exchange.IMPORT_ORDER if kinds is None else kinds)}


def protected(api: exchange.ApiBase, kinds=exchange.IMPORT_ORDER) -> set[tuple[str, str]]:
    """Entities ``--prune`` never deletes beyond what ``export`` leaves out: ziti-lite's embedded
    edge router (on a served controller: the router whose certificate is the server's)."""
    if "edgeRouters" not in kinds:
        return set()
    if isinstance(api, exchange.LocalApi):
        store = api.ctl.store
        name = store.value("SELECT r.name FROM controller c JOIN routers r ON r.id = c.value"
                           " WHERE c.key = ?", (STATE_KEY,))
        return {("edgeRouters", name)} if name else set()
    if isinstance(api, remote.RemoteApi) and api.server_fingerprint:
        return {("edgeRouters", r["name"]) for r in api.list("edge-routers")
                if r.get("fingerprint") == api.server_fingerprint}
    return set()


def error_text(reply: Any) -> str:
    error = (reply or {}).get("error") or {}
    cause = error.get("cause") or {}
    if isinstance(cause, dict) and cause.get("field"):
        return f"field {cause['field']!r}: {cause.get('reason') or cause.get('message') or error.get('message')}"
    if isinstance(cause, dict) and cause.get("message"):
        return f"{error.get('code')}: {cause['message']}"
    return f"{error.get('code')}: {error.get('message')}"


def _id(api: exchange.ApiBase, names: dict[str, dict[str, str]], collection: str, name: str) -> str:
    """The id of an entity by name: read with the network's names, or (a router's identity that
    this run created with its router) looked up."""
    found = names.get(collection, {}).get(name)
    if found is None:
        row = api.by_name(collection, name)
        if row is None:
            raise NetcodeError(f"no {collection[:-1]} named {name!r}")
        found = names.setdefault(collection, {})[name] = row["id"]
    return found


def execute(api: exchange.ApiBase, changes: list[plan.Change], network: Network, say: Say = lambda s: None) -> None:
    names = network_names(api, reads(network))
    done: list[str] = []

    def ref(collection: str, value: Any) -> str:
        name = value[1:] if isinstance(value, str) and value.startswith("@") else value
        found = names.get(collection, {}).get(name)
        if found is None:
            raise NetcodeError(f"no {collection[:-1]} named {name!r}")
        return found

    # signers naming their enrollment auth policy by @name come before the policies (which name
    # signers): that policy and the modes it allows are patched in once the rest is done
    later: list[plan.Change] = []
    for c in changes:
        entity = dict(c.entity)
        deferred = exchange.defer_enroll_policy(c.kind, entity) if c.action == "create" else None
        if deferred is not None:
            c = plan.Change("create", c.kind, c.name, entity)
            later.append(plan.Change("update", c.kind, c.name, entity, {k: (None, v) for k, v in deferred.items()}))
        elif c.action == "update" and exchange.defer_enroll_policy(c.kind, {k: v for k, (_, v) in c.fields.items()}):
            later.append(c)
            continue
        _run(api, c, network, ref, names, done, say)
    for c in later:
        _run(api, c, network, ref, names, done, say)


def _run(api: exchange.ApiBase, c: plan.Change, network: Network, ref: Callable[[str, Any], str],
         names: dict[str, dict[str, str]], done: list[str], say: Say) -> None:
    collection = exchange.COLLECTION[c.kind]
    what = f"{c.kind} {c.name!r}"
    where = network.where(c.kind, c.name) if c.action != "delete" else f"{network.file}: {what}"
    try:
        if c.action == "create":
            body = exchange.to_body(c.kind, c.entity, ref)
            status, reply = api.call("POST", f"/{collection}", body)
            ok = status == 201
            if ok:
                names.setdefault(collection, {})[c.name] = reply["data"]["id"]
        elif c.action == "update":
            patch = {k: new for k, (_, new) in c.fields.items()}
            body = exchange.to_body(c.kind, patch, ref, create=False)
            status, reply = api.call("PATCH", f"/{collection}/{_id(api, names, collection, c.name)}", body)
            ok = status == 200
        else:
            status, reply = api.call("DELETE", f"/{collection}/{names[collection][c.name]}")
            ok = status == 200
            if ok:
                names[collection].pop(c.name, None)
    except NetcodeError as e:
        raise Refused(f"{where}: {e}", done) from None
    if not ok and status == 401:
        action = "update" if c.action == "update" else c.action
        raise Refused(f"{where}: {exchange.refused(collection, action)}: {error_text(reply)}", done)
    if not ok:
        raise Refused(f"{where}: the controller refused the {c.action} ({status}): {error_text(reply)}", done)
    done.append(f"{c.action}d {what}")
    say(f"{c.action}d {what}")


def prepare(api: exchange.ApiBase, network: Network, prune: bool) -> tuple[list[plan.Change], set]:
    kinds = reads(network)
    current = exchange.export(api, kinds)
    plan.check_references(network, network_names(api, kinds))
    keep = protected(api, tuple(network.entities) if prune else ())
    return plan.compute(current, network, prune, keep, system(api, network)), keep


def system(api: exchange.ApiBase, network: Network) -> dict[str, dict]:
    """The network's router identities and default admin, where the file has identities (a 2.0
    export lists them; any file may name one)."""
    if not network.entities.get("identities"):
        return {}
    return exchange.system_identities(api)


def apply_local(api: exchange.LocalApi, network: Network, prune: bool, dry_run: bool, say: Say) -> Outcome:
    outcome = Outcome([])
    try:
        # the plan is made inside the transaction too: no other writer can change the network
        # between reading it and writing the difference
        with api.ctl.store.write():
            changes, _ = prepare(api, network, prune)
            outcome.changes = changes
            for line in plan.render(changes):
                say(line)
            execute(api, changes, network)
            outcome.failures = assertions.evaluate(api, network.tests)
            if outcome.failures or dry_run or not changes:
                raise _Rollback
    except _Rollback:
        return outcome
    except Refused as e:
        raise NetcodeError(f"{e.args[0]}; nothing was changed") from None
    outcome.applied = True
    return outcome


def apply_remote(api: exchange.ApiBase, network: Network, prune: bool, dry_run: bool, say: Say) -> Outcome:
    changes, keep = prepare(api, network, prune)
    for line in plan.render(changes):
        say(line)
    outcome = Outcome(changes)
    # the rehearsal: the live network's export in a scratch ziti-lite, the plan on top of it
    with scratch.Scratch(exchange.export(api, reads(network))) as rehearsal:
        rehearsal_changes = plan.compute(exchange.export(rehearsal.api, reads(network)), network, prune, keep,
                                         system(rehearsal.api, network))
        try:
            execute(rehearsal.api, rehearsal_changes, network)
        except Refused as e:
            raise NetcodeError(f"{e.args[0]}; nothing was changed") from None
        outcome.failures = assertions.evaluate(rehearsal.api, network.tests)
    if outcome.failures or dry_run or not changes:
        return outcome
    try:
        execute(api, changes, network, say)
    except Refused as e:
        done = e.args[1]
        left = len(changes) - len(done)
        raise NetcodeError(f"{e.args[0]}; done before it: {', '.join(done) or 'nothing'};"
                           f" not done: this and {left - 1} more change(s)") from None
    outcome.applied = True
    return outcome
