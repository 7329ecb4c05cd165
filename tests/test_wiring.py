"""One visible wiring (``ziti_lite/wiring.py``), typed auth levels and declared state.

Every registration (operation, listener, prefetcher, list condition, integrity check, login
method, auth query, after-change hook, login outcome) comes from a module listed in
``wiring.MODULES``, and every listed module registers something; an auth level is one of
``AuthLevel`` or the route is refused when it is declared; ``ziti-lite routes`` names the
handler of every operation; the controller, the request context and the settings hold only
attributes they declare.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys

import apsw
import pytest
from click.testing import CliRunner

from ziti_lite import integrity, wiring
from ziti_lite.api import crud
from ziti_lite.api.context import Ctx
from ziti_lite.api.ops import AFTER_CHANGE, OPS, WEBSOCKETS, op
from ziti_lite.api.router import AUTH_LEVELS, Route
from ziti_lite.auth.methods import AUTH_QUERY_PROVIDERS, LOGIN_OUTCOMES, METHODS
from ziti_lite.cli import cli
from ziti_lite.config import Settings

LISTED = {name for name, _ in wiring.MODULES}


def _module(fn) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn.__module__


def _registrations() -> list[tuple[str, str]]:
    """(kind, defining module) of everything registered once the wiring is loaded."""
    w = wiring.load()
    out = [("resource", m.__name__) for m in w.modules if getattr(m, "RESOURCES", ())]
    out += [("op", _module(r.handler)) for r in OPS]
    out += [("listener", _module(fn)) for fns in crud.LISTENERS.values() for fn in fns]
    out += [("prefetch", _module(fn)) for fn in crud.PREFETCH.values()]
    out += [("list condition", _module(fn)) for fns in crud.LIST_CONDITIONS.values() for fn in fns]
    out += [("integrity check", _module(fn)) for fn in integrity.CHECKS]
    out += [("login method", _module(fn)) for fn in METHODS.values()]
    out += [("auth query", _module(fn)) for fn in AUTH_QUERY_PROVIDERS]
    out += [("listener of every resource", _module(fn)) for fn in crud.ANY_LISTENERS]
    out += [("after-change hook", _module(fn)) for fn in AFTER_CHANGE]
    out += [("login outcome", _module(fn)) for fn in LOGIN_OUTCOMES]
    out += [("websocket", _module(fn)) for fn in WEBSOCKETS.values()]
    return out


def test_every_registration_comes_from_a_listed_module():
    strays = sorted({f"{kind} from {module}" for kind, module in _registrations() if module not in LISTED})
    assert not strays, f"add these modules to wiring.MODULES: {strays}"


def test_every_listed_module_registers_something():
    registering = {module for _, module in _registrations()}
    assert not LISTED - registering, f"wiring.MODULES entries that register nothing: {LISTED - registering}"
    assert len(LISTED) == len(wiring.MODULES), "a module listed twice"


def test_the_controller_mounts_the_whole_table(ctl):
    assert ctl.router.routes == list(wiring.load().routes)
    assert len(ctl.router.routes) == len({(r.api, r.method, r.path) for r in ctl.router.routes})
    names = {r.name for r in wiring.resources()}
    assert {"identities", "services", "edge-routers", "service-policies", "enrollments"} <= names
    assert wiring.resource("identities").name == "identities"


def test_every_route_has_a_known_auth_level():
    routes = wiring.load().routes
    assert {r.auth for r in routes} == set(AUTH_LEVELS)


async def _handler(ctx: Ctx):
    return None


@pytest.mark.parametrize("level", ["Admin", "admins", "", "sesion", None])
def test_an_unknown_auth_level_fails_at_declaration(level):
    before = len(OPS)
    with pytest.raises(ValueError, match="auth level"):
        op("GET", "/nowhere", auth=level)(_handler)  # type: ignore[arg-type]
    assert len(OPS) == before
    with pytest.raises(ValueError, match="auth level"):
        Route("management", "GET", "/nowhere", _handler, level)  # type: ignore[arg-type]


def test_an_unknown_api_or_method_fails_at_declaration():
    with pytest.raises(ValueError, match="api"):
        Route("managment", "GET", "/nowhere", _handler, "admin")
    with pytest.raises(ValueError, match="method"):
        Route("management", "get", "/nowhere", _handler, "admin")


def test_routes_command_names_every_handler():
    r = CliRunner().invoke(cli, ["routes"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert len(lines) == len(wiring.load().routes)
    post_enrollments = [line.split() for line in lines if line.split()[:2] == ["POST", "/enrollments"]]
    assert post_enrollments == [["POST", "/enrollments", "management", "admin", "enrollment.create",
                                 "ziti_lite.resources.cas_enrollments:create_enrollment"]]
    generic = [line.split() for line in lines if line.split()[:2] == ["GET", "/identities"]]
    assert generic == [["GET", "/identities", "management", "admin", "identity.read",
                        "ziti_lite.api.crud:list_(identities)"]]
    for line in lines:
        method, path, api, level, need, handler = line.split()
        assert level in AUTH_LEVELS and api in ("management", "client", "fabric")
        assert (need == "-") == (level != "admin"), line
        module, _, function = handler.partition(":")
        assert module in sys.modules and function and "<locals>" not in function, line
    relation = [line.split() for line in lines if line.split()[:2] == ["GET", "/config-types/{id}/configs"]]
    assert relation[0][4:] == ["config.read", "ziti_lite.handlers.relations:_register(listConfigsForConfigType)"]
    client = CliRunner().invoke(cli, ["routes", "--api", "client"])
    assert client.exit_code == 0
    assert all(line.split()[2] == "client" for line in client.output.splitlines())


@pytest.mark.slow
def test_check_command_has_the_policy_checks(template_db, tmp_path):
    # a fresh interpreter: nothing but the command itself has imported anything
    db = tmp_path / "drift.db"
    shutil.copy(template_db, db)
    conn = apsw.Connection(str(db))
    conn.execute("DELETE FROM edge_router_policy_identities")  # drift only policy/checks.py sees
    conn.close()
    r = subprocess.run([sys.executable, "-m", "ziti_lite", "check", "--db", str(db)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "edge-router-policies" in r.stdout and "identityRoles selects 1 identities" in r.stdout


def test_controller_state_is_declared(ctl):
    with pytest.raises(AttributeError):
        ctl.something_new = 1
    assert not hasattr(ctl, "__dict__")
    for name in ctl.__slots__:
        getattr(ctl, name)  # every declared slot is set by __init__


def test_context_and_settings_state_is_declared(ctl):
    ctx = Ctx(ctl, None, "management", {}, wiring.load().routes[0])  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        ctx.something_new = 1
    for name in Ctx.__slots__:
        getattr(ctx, name)
    settings = Settings(db=":memory:")
    with pytest.raises(AttributeError):
        settings.something_new = 1  # type: ignore[attr-defined]


def _hook_names(res) -> set[str]:
    return {wiring.callable_name(fn) for fn in (res.prepare, res.render, res.before_delete, res.after_write) if fn}


def test_hooks_prints_every_registered_callable():
    out = CliRunner().invoke(cli, ["hooks"])
    assert out.exit_code == 0, out.output
    printed = {line.split()[-1] for line in out.output.splitlines() if ":" in line}
    registered = {wiring.callable_name(fn) for fns in crud.LISTENERS.values() for fn in fns}
    registered |= {wiring.callable_name(fn) for fns in crud.LIST_CONDITIONS.values() for fn in fns}
    registered |= {wiring.callable_name(fn) for fn in (*crud.PREFETCH.values(), *crud.ANY_LISTENERS, *AFTER_CHANGE,
                                                        *integrity.CHECKS, integrity.foreign_keys)}
    for res in wiring.resources():
        registered |= _hook_names(res)
    assert len(registered) > 30
    assert registered - printed == set()
    # a registration on a resource that is not mounted would never run: the keys are the very
    # Resource objects of the route table
    mounted = set(wiring.resources())
    for registry in (crud.LISTENERS, crud.LIST_CONDITIONS, crud.PREFETCH):
        assert set(registry) <= mounted, [r.name for r in set(registry) - mounted]


def test_hooks_shows_the_order_a_write_runs_in():
    out = CliRunner().invoke(cli, ["hooks", "--resource", "identities"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0] == "identities" and "integrity checks" not in out.output
    create = lines[lines.index("  create") + 1: lines.index("  update")]
    steps = [line.split()[0] for line in create]
    assert steps[0] == "prepare" and steps[-1] == "after"     # "after the request"
    assert steps.index("after_write") < steps.index("listener")
    assert any("ziti_lite.policy.links:" in line for line in create)


def test_hooks_of_an_unknown_resource_is_one_line():
    out = CliRunner().invoke(cli, ["hooks", "--resource", "nope"])
    assert out.exit_code == 1 and out.output.strip().splitlines() == ["Error: no resource 'nope': `ziti-lite hooks`"
                                                                       " lists them all"]
