"""The import layers of ziti_lite, checked from the source (``ast``, nothing is imported).

A module may import modules of its own layer or of layers below it, never above; imports run at
module level (a function-level import of a ziti_lite module must be in ``LAZY`` with a reason);
the import graph has no cycle; a package's ``__init__`` (run whenever any of its modules is
imported) imports nothing above the lowest of its modules; and modules are imported by name,
not through ``importlib``, except by ``wiring.py``, whose ``MODULES`` list is read here as
imports of its own. Imports under ``if TYPE_CHECKING:`` never run and are exempt: annotations may
name a higher layer's types (in one package; across folders see ``UPHILL``). ARCHITECTURE.md describes the layers.
"""

from __future__ import annotations

import ast
import functools
import pathlib
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ziti_lite"

# bottom to top. A package (a folder of ``ziti_lite``) belongs to one layer as a whole, named by
# its folder pattern; a module directly under ``ziti_lite/`` is a unit of its own, named exactly.
# So the file list tells the layers: ``test_every_folder_is_in_one_layer`` keeps it that way.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("ziti_lite", "ziti_lite.errors", "ziti_lite.clock", "ziti_lite.ids", "ziti_lite.config",
                    "ziti_lite.logs", "ziti_lite.zitiql", "ziti_lite.semver", "ziti_lite.permissions", "ziti_lite.tls",
                    "ziti_lite.connections")),
    # the OpenZiti channel codec every channel peer shares (SDKs, real routers, the ws-api)
    ("channel", ("ziti_lite.channel.*",)),
    ("db", ("ziti_lite.db.*", "ziti_lite.integrity")),
    # backups of the one file: timed snapshots while serving, restore (on the store and its lock)
    ("backup", ("ziti_lite.backup.*",)),
    ("pki", ("ziti_lite.pki.*",)),
    # the controller's own certificates over time: renewal, live TLS contexts, expiry, start-up checks
    ("lifecycle", ("ziti_lite.lifecycle.*",)),
    # the request machinery: route table, context, envelope, generic CRUD, metrics
    ("http", ("ziti_lite.api.*", "ziti_lite.zac")),
    # who may reach what: the policy model, its membership tables, access and posture evaluation
    ("policy engine", ("ziti_lite.policy.*",)),
    # credentials, logins and API sessions; the enrollments (one-time tokens) that turn into
    # credentials; the OIDC tokens, one more way to name an API session
    ("auth", ("ziti_lite.auth.*",)),
    # the shared floor of both routers: their checks, terminator strategy and penalties, router
    # presence (which the resources, client and fabric APIs read), the version they name
    ("routing", ("ziti_lite.routing.*",)),
    ("resources", ("ziti_lite.resources.*",)),
    # hand-written operations and hooks over the resources: the management and shared ones
    # (handlers), enrollment completion, the client API, the fabric API
    ("operations", ("ziti_lite.handlers.*", "ziti_lite.enroll.*", "ziti_lite.client.*", "ziti_lite.fabric.*")),
    # the OIDC provider's endpoints, which log in through the handlers' primary methods
    ("oidc", ("ziti_lite.oidc.*",)),
    # the event stream (bus, upstream's shapes, sinks, live streams) and the audit trail: hooks on
    # every resource and login; the routers and the controller emit through it
    ("events", ("ziti_lite.events.*",)),
    ("wiring", ("ziti_lite.wiring",)),
    # the routers, siblings on the shared floor (channel/, routing/): the embedded edge router,
    # and the control channel of real routers; neither imports the other (test below)
    ("routers", ("ziti_lite.edge.*", "ziti_lite.ctrl.*")),
    # the ASGI app: the controller, first-start seeding, metrics and the access log around it
    ("controller", ("ziti_lite.bootstrap", "ziti_lite.observe", "ziti_lite.app")),
    # network as code (``netcode``) builds on export/import and the whole in-process controller
    ("entry points", ("ziti_lite.server", "ziti_lite.cli", "ziti_lite.exchange", "ziti_lite.testing",
                      "ziti_lite.__main__", "ziti_lite.netcode.*")),
)

# (module, imported module): function-level imports that stay, each for a reason
LAZY: dict[tuple[str, str], str] = {
    ("ziti_lite.cli", "ziti_lite.server"): "CLI start-up: only `serve` loads uvicorn and the server",
    ("ziti_lite.cli", "ziti_lite.integrity"): "CLI start-up: only `check` runs the integrity checks",
    ("ziti_lite.cli", "ziti_lite.lifecycle.expiry"): "CLI start-up: only `check` reads certificate ends",
    ("ziti_lite.cli", "ziti_lite.exchange"): "CLI start-up: only `import`/`export` load the in-process API",
    ("ziti_lite.cli", "ziti_lite.netcode.remote"): "CLI start-up: only `apply`/`test`/`why` load netcode",
    ("ziti_lite.cli", "ziti_lite.netcode.document"): "CLI start-up: only `apply`/`test`/`why` load netcode",
    ("ziti_lite.cli", "ziti_lite.netcode.apply"): "CLI start-up: only `apply`/`test`/`why` load netcode",
    ("ziti_lite.cli", "ziti_lite.netcode.assertions"): "CLI start-up: only `apply`/`test`/`why` load netcode",
    ("ziti_lite.cli", "ziti_lite.netcode.why"): "CLI start-up: only `apply`/`test`/`why` load netcode",
    ("ziti_lite.cli", "ziti_lite.wiring"): "CLI start-up: `version` and `--help` load no controller",
    ("ziti_lite.cli", "ziti_lite.db.store"): "CLI start-up: only commands that open a database load apsw",
    ("ziti_lite.cli", "ziti_lite.backup.restore"): "CLI start-up: only `restore` loads it (and apsw)",
    ("ziti_lite.cli", "ziti_lite.events.audit"): "CLI start-up: only `audit` loads the audit trail's queries",
    ("ziti_lite.cli", "ziti_lite.oidc.common"): "CLI start-up: only `serve` checks OIDC redirect URI patterns",
    ("ziti_lite.testing", "ziti_lite.app"): "pytest plugin (entry point pytest11) loaded by every pytest run"
                                            " where ziti-lite is installed: stdlib only until a fixture runs",
    ("ziti_lite.testing", "ziti_lite.config"): "pytest plugin: stdlib only until a fixture runs",
    ("ziti_lite.testing", "ziti_lite.db.store"): "pytest plugin: stdlib only until a fixture runs",
}


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


MODULES = _modules()


def folder_of(module: str) -> str:
    """The package folder a module lives in (``ziti_lite.api`` for ``ziti_lite.api.crud`` and for
    ``ziti_lite.api`` itself), or the module itself when it sits directly under ``ziti_lite/``."""
    parts = module.split(".")
    if len(parts) == 1:
        return module
    return ".".join(parts[:2])


def layer_of(module: str) -> int:
    folder = folder_of(module)
    name = module if folder == module and not MODULES[module][1] or module == "ziti_lite" else f"{folder}.*"
    for index, (_, patterns) in enumerate(LAYERS):
        if name in patterns:
            return index
    raise AssertionError(f"{module} is in no layer: add {name!r} to LAYERS in tests/test_layers.py")


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "ziti_lite"]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "ziti_lite":
        return []
    # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names]


def _type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


class Imports:
    """Every import of every module: (module, target, line, in a function); the imports under
    ``if TYPE_CHECKING:`` apart, in ``typing``: (module, target, line)."""

    def __init__(self) -> None:
        self.edges: list[tuple[str, str, int, bool]] = []
        self.typing: list[tuple[str, str, int]] = []
        self.dynamic: list[tuple[str, int]] = []
        for module, (path, is_package) in MODULES.items():
            self._walk(module, is_package, ast.parse(path.read_text()), in_function=False)
        # wiring.MODULES: imported by name through importlib, read here as its imports
        wiring = ast.parse((PACKAGE / "wiring.py").read_text())
        for node in ast.walk(wiring):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES:
                self.edges.append(("ziti_lite.wiring", node.value, node.lineno, False))

    def _walk(self, module: str, is_package: bool, node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                self._walk(module, is_package, ast.Module(body=child.orelse, type_ignores=[]), in_function)
                for node in ast.walk(ast.Module(body=child.body, type_ignores=[])):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        self.typing += [(module, t, node.lineno) for t in _targets(module, is_package, node)
                                        if t != module]
                continue  # typing only: never runs
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, is_package, child):
                    if target != module:
                        self.edges.append((module, target, child.lineno, in_function))
            if isinstance(child, ast.Call):
                func = child.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if name in ("import_module", "__import__"):
                    self.dynamic.append((module, child.lineno))
            self._walk(module, is_package, child,
                       in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


@functools.cache
def imports() -> Imports:
    """Read once, when a test first asks (not at collection: every xdist worker collects)."""
    return Imports()


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


def test_no_import_goes_up_the_layers():
    upward = [f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]}) at line {line}"
              for m, t, line, _ in imports().edges if layer_of(t) > layer_of(m)]
    assert not upward, "\n".join(upward)


def test_package_inits_import_nothing_above_their_modules():
    # importing any module of a package runs the package's __init__ first
    bad = []
    for package, (_, is_package) in MODULES.items():
        if not is_package:
            continue
        lowest = min(layer_of(m) for m in MODULES if m.startswith(package + "."))
        bad += [f"{package}/__init__ imports {t} ({LAYERS[layer_of(t)][0]}), above its lowest module's"
                f" layer ({LAYERS[lowest][0]})"
                for m, t, _, _ in imports().edges if m == package and layer_of(t) > lowest]
    assert not bad, "\n".join(bad)


def test_imports_are_at_module_level():
    lazy = {(m, t): line for m, t, line, in_function in imports().edges if in_function}
    unexplained = [f"{m} imports {t} inside a function (line {line})" for (m, t), line in lazy.items()
                   if (m, t) not in LAZY]
    assert not unexplained, "\n".join(unexplained) + "\n(move it to the top, or add it to LAZY with a reason)"
    stale = [key for key in LAZY if key not in lazy]
    assert not stale, f"LAZY entries no import needs any more: {stale}"


def test_no_dynamic_imports_outside_wiring():
    dynamic = [f"{m} line {line}" for m, line in imports().dynamic if m != "ziti_lite.wiring"]
    assert not dynamic, "importlib/__import__ hides an import from this test: " + ", ".join(dynamic)


def _cycles(edges: list[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components (Tarjan) of more than one module."""
    graph: dict[str, set[str]] = defaultdict(set)
    for m, t in edges:
        graph[m].add(t)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycles():
    cycles = _cycles([(m, t) for m, t, _, _ in imports().edges])
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_type_only_cycles_stay_inside_one_folder():
    # annotations included, a loop may only join the modules of one package that name each
    # other's classes (a server and its parts); one through the layers ties them all together
    edges = [(m, t) for m, t, _, _ in imports().edges] + [(m, t) for m, t, _ in imports().typing]
    wide = [c for c in _cycles(edges) if len({folder_of(m) for m in c}) > 1]
    assert not wide, "type-only import cycles across folders: " + "; ".join(" <-> ".join(c) for c in wide)


def test_the_two_routers_import_nothing_of_each_other():
    # both stand on channel/ and routing/; annotations included
    edges = [(m, t) for m, t, _, _ in imports().edges] + [(m, t) for m, t, _ in imports().typing]
    crossing = [f"{m} imports {t}" for m, t in edges
                if {folder_of(m), folder_of(t)} == {"ziti_lite.edge", "ziti_lite.ctrl"}]
    assert not crossing, "\n".join(crossing)


def test_the_checks_see_what_they_check():
    # a sanity check of the parser itself: known imports of each kind are found
    edges = {(m, t, f) for m, t, _, f in imports().edges}
    assert ("ziti_lite.app", "ziti_lite.wiring", False) in edges
    assert ("ziti_lite.wiring", "ziti_lite.client.sessions", False) in edges
    assert ("ziti_lite.cli", "ziti_lite.server", True) in edges
    assert ("ziti_lite.netcode.apply", "ziti_lite.exchange", False) in edges
    assert layer_of("ziti_lite.netcode.plan") == layer_of("ziti_lite.exchange") > layer_of("ziti_lite.app")
    assert ("ziti_lite.api.context", "ziti_lite.api.controller", False) not in edges    # under TYPE_CHECKING
    assert ("ziti_lite.api.context", "ziti_lite.api.controller") in {(m, t) for m, t, _ in imports().typing}
    assert layer_of("ziti_lite.api.crud") < layer_of("ziti_lite.resources.identities") < layer_of(
        "ziti_lite.handlers.authentication")
    assert folder_of("ziti_lite.api.crud") == folder_of("ziti_lite.api") == "ziti_lite.api"
    assert folder_of("ziti_lite.app") == "ziti_lite.app"
    assert layer_of("ziti_lite.api") == layer_of("ziti_lite.api.crud")   # a package's __init__ is its folder's
    assert 5 <= floors() <= len(LAYERS)


# ---- the folder picture: the import graph between folders (packages, and modules directly
# under ziti_lite/), type-only imports included. An arrow runs up when a folder imports one of
# a higher layer: at run time the module-level test above refuses it, so only an annotation
# can, and each one is listed here with its reason (at most 3: name a Protocol of your own
# layer instead).
UPHILL: dict[tuple[str, str], str] = {
    # none today: Ctx.ctl is an api.controller.ApiController, Ctx.session an api.caller.Session
}


def folder_arrows() -> set[tuple[str, str]]:
    edges = [(m, t) for m, t, _, _ in imports().edges] + [(m, t) for m, t, _ in imports().typing]
    return {(folder_of(m), folder_of(t)) for m, t in edges if folder_of(m) != folder_of(t)}


def test_every_layer_pattern_names_a_folder_or_a_top_level_module():
    folders = {folder_of(m) for m in MODULES}
    bad = [p for _, patterns in LAYERS for p in patterns
           if not (p.endswith(".*") and p[:-2] in folders and MODULES[p[:-2]][1])
           and not (p in MODULES and folder_of(p) == p and (p == "ziti_lite" or not MODULES[p][1]))]
    assert not bad, f"LAYERS names a folder as a module, a module inside a folder, or nothing: {bad}"


def test_folder_imports_run_downhill():
    layer = {folder_of(m): layer_of(m) for m in MODULES}
    up = {(a, b) for a, b in folder_arrows() if layer[b] > layer[a]}
    described = [f"{a} ({LAYERS[layer[a]][0]}) -> {b} ({LAYERS[layer[b]][0]})" for a, b in sorted(up - set(UPHILL))]
    assert not described, "folder imports running up the layers:\n" + "\n".join(described)
    assert not set(UPHILL) - up, f"UPHILL entries no import needs any more: {sorted(set(UPHILL) - up)}"
    assert len(UPHILL) <= 3


def test_no_folder_cycles_but_the_listed_annotations():
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in folder_arrows() - set(UPHILL):
        graph[a].add(b)
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            raise AssertionError("folder import cycle: " + " -> ".join(path[path.index(node):] + [node]))
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, path + [node])
        done.add(node)

    for folder in sorted(graph):
        visit(folder, [])


def floors() -> int:
    """The height of the folder picture: the longest downhill chain of folder imports."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in folder_arrows() - set(UPHILL):
        graph[a].add(b)
    height: dict[str, int] = {}

    def h(node: str) -> int:
        if node not in height:
            height[node] = 1 + max((h(n) for n in graph[node]), default=0)
        return height[node]

    return max(h(folder_of(m)) for m in MODULES)
