"""ZAC 4.5.1's JWT signer form against ziti-lite and the real OpenZiti v2.0.3 controller: every
field the form sends is kept, and both controllers answer alike (issue 38).

The form (shown its auto-enrollment toggles only by a controller whose ``/version`` is 2.x, its
target token choice from 1.4 on) sends ``targetToken``, ``enrollToCertEnabled`` and
``enrollToTokenEnabled`` with the signer's other fields; it has no field for the name or
attribute claims selectors nor the enrollment auth policy. So on each controller an admin:

1. creates a signer in the form with every field it has set (target token ID, both enrollment
   toggles on, claims property, external id, client id, auth URL, scopes, JWKS endpoint), saves
   (``POST``) and reopens it: the form shows every value entered, the API returns them;
2. gives the signer name and attribute claims selectors and an enrollment auth policy through
   the API, reopens it in the form and saves it unchanged (a ``PUT`` of the form's fields only),
   then reopens it again.

The test asserts the values shown and returned after each step, and that ziti-lite's writes'
statuses, stored signer (ids, times and links aside) and reopened form equal v2.0.3's.

Needs what ``test_zac45_walk.py`` needs.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.interop.conftest import start_quickstart
from tests.interop.test_zac45 import console, console_page, zac_dir  # noqa: F401 - the fixtures
from tests.interop.test_zac45_walk import MGMT, POLICY, login, static_zac  # noqa: F401 - the fixture

pytestmark = pytest.mark.interop

NAME = "form-jwt"
ENTERED = {"name": NAME, "issuer": "https://form.example", "audience": "form-aud", "claimsProperty": "email",
           "clientId": "form-client", "externalAuthUrl": "https://form.example/auth",
           "jwksEndpoint": "https://form.example/jwks"}
PLACEHOLDERS = {"name": "Name this JWT Signer", "issuer": "Enter issuer", "audience": "Enter audience",
                "claimsProperty": "Enter claims property", "clientId": "Enter client ID",
                "externalAuthUrl": "Enter external auth URL", "jwksEndpoint": "Enter endpoint URL"}
TOGGLES = {"useExternalId": "Use External ID", "enrollToCertEnabled": "Auto-Enroll to Cert",
           "enrollToTokenEnabled": "Auto-Enroll to Token", "enabled": "ENABLED"}
SCOPES = ["openid", "email"]
SELECTORS = {"enrollNameClaimsSelector": "/email", "enrollAttributeClaimsSelector": "/groups"}
# what the form shows: its inputs, toggles, scopes' chips and (once "show more" is on) the target token
READ_FORM = """([placeholders, toggles]) => {
  const out = {};
  for (const [key, p] of Object.entries(placeholders)) {
    out[key] = document.querySelector(`input[placeholder="${p}"]`)?.value ?? null;
  }
  for (const [key, label] of Object.entries(toggles)) {
    const box = [...document.querySelectorAll('.config-container')].find(
      c => c.querySelector('.config-container-label')?.textContent.trim() === label);
    out[key] = box ? box.querySelector('.toggle').classList.contains('on') : null;
  }
  out.scopes = [...document.querySelectorAll('.p-chips-token-label')].map(e => e.textContent.trim());
  out.targetToken = document.querySelector('select#authPolicyId')?.value ?? null;
  return out;
}"""


class Api:
    """The management API of a controller as its admin."""

    def __init__(self, url: str, user: str, password: str):
        self.url = url + MGMT
        self.tls = ssl._create_unverified_context()  # noqa: S323 - loopback, each controller's own fresh PKI
        self.token = self.call("POST", "/authenticate?method=password", {"username": user, "password": password},
                               auth=False)["token"]

    def call(self, method: str, path: str, body: dict | None = None, auth: bool = True):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"content-type": "application/json",
                                              **({"zt-session": self.token} if auth else {})})
        try:
            with urllib.request.urlopen(req, context=self.tls, timeout=30) as r:
                return json.loads(r.read())["data"]
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{method} {path}: {e.code} {e.read().decode(errors='replace')}") from None

    def refused(self, method: str, path: str, body: dict, names: dict[str, str]) -> dict:
        """A write the controller refuses: its status and error code and cause, ids named by ``names``."""
        try:
            self.call(method, path, body)
        except AssertionError as e:
            text = str(e)
            for id, name in names.items():
                text = text.replace(id, name)
            status, _, reply = text.split(": ", 1)[1].partition(" ")
            error = json.loads(reply)["error"]
            return {"status": int(status), "code": error["code"], "cause": error.get("cause")}
        raise AssertionError(f"{method} {path} {body} was not refused")

    def signer(self, name: str) -> dict:
        found = self.call("GET", "/external-jwt-signers?filter=" + urllib.parse.quote(f'name="{name}"'))
        assert len(found) == 1, found
        return found[0]


def _show_more(page) -> None:
    if not page.locator("select#authPolicyId").count():
        page.click("lib-form-field-toggle .form-field-toggle-container")
        page.wait_for_selector("select#authPolicyId", timeout=10_000)


def _toggle(page, label: str):
    return page.locator(f".config-container:has(.config-container-label:text-is('{label}')) .toggle").first


def _reopen(page, zac: str, id: str) -> dict:
    page.goto(zac + "/zac/jwt-signers/" + id, wait_until="networkidle")
    page.wait_for_function("([p, v]) => document.querySelector(`input[placeholder=\"${p}\"]`)?.value === v",
                           arg=[PLACEHOLDERS["name"], NAME], timeout=15_000)
    _show_more(page)
    return page.evaluate(READ_FORM, [PLACEHOLDERS, TOGGLES])


def _saved(page, method: str) -> None:
    """Save the form: its write (``method``) answered, then back to the list as the form goes."""
    try:
        with page.expect_response(lambda r: r.request.method == method and "/external-jwt-signers" in r.url,
                                  timeout=30_000):
            page.click(".save-button")
    except Exception as e:   # what the console said instead, if anything
        growl = page.evaluate("document.querySelector('#Growler')?.innerText || ''")
        raise AssertionError(f"the form sent no {method}: {growl.strip()!r}") from e
    page.wait_for_url("**/zac/jwt-signers", timeout=30_000)
    page.wait_for_load_state("networkidle")


def _stored(signer: dict, policy: str) -> dict:
    """The signer as the API returns it, less what differs by controller (ids, times, links)."""
    out = {k: v for k, v in signer.items() if k not in ("id", "createdAt", "updatedAt", "_links")}
    if out.get("enrollAuthPolicyId") == policy:
        out["enrollAuthPolicyId"] = "<the policy made>"
    return out


def signer_form(zac: str, controller: str, user: str, password: str, name_controller: bool) -> dict:
    """Both steps on one controller: what its API returned, what the form showed, the writes."""
    api = Api(controller, user, password)
    no_jwt = api.call("POST", "/auth-policies", {"name": "form-ap-no-jwt", "primary": POLICY,
                                                 "secondary": {"requireTotp": False}})["id"]
    policy = api.call("POST", "/auth-policies", {"name": "form-ap", "secondary": {"requireTotp": False},
                                                 "primary": {**POLICY, "extJwt": {"allowed": True,
                                                                                  "allowedSigners": []}}})["id"]
    answers: list[tuple[str, str, int]] = []
    out: dict = {}
    with console_page(answers) as page:
        login(page, zac, controller, user, password, name_controller)
        page.goto(zac + "/zac/jwt-signers", wait_until="networkidle")
        page.click("[data-action=add]")
        page.wait_for_selector(f"input[placeholder='{PLACEHOLDERS['name']}']", timeout=15_000)
        for key, value in ENTERED.items():
            field = page.locator(f"input[placeholder='{PLACEHOLDERS[key]}']")
            field.click()
            field.press_sequentially(value)    # keys, as typed: the claims property sets "use external id"
        for n, scope in enumerate(SCOPES, 1):
            page.locator("lib-chips-input input").press_sequentially(scope + ",")   # the separator makes a chip
            page.wait_for_function("(n) => document.querySelectorAll('.p-chips-token-label').length === n", arg=n,
                                   timeout=10_000)
        out["toggles shown"] = {key: _toggle(page, label).count() > 0 for key, label in TOGGLES.items()}
        _toggle(page, TOGGLES["enrollToCertEnabled"]).click()
        _toggle(page, TOGGLES["enrollToTokenEnabled"]).click()
        _show_more(page)
        page.select_option("select#authPolicyId", "ID")
        _saved(page, "POST")
        signer = api.signer(NAME)
        out["created"] = _stored(signer, policy)
        out["created, reopened"] = _reopen(page, zac, signer["id"])
        # a policy without external JWT login cannot take the identities the signer enrolls to a token
        out["refused policy"] = api.refused("PATCH", "/external-jwt-signers/" + signer["id"],
                                            {"enrollAuthPolicyId": no_jwt}, {no_jwt: "<the policy without JWT>"})
        api.call("PATCH", "/external-jwt-signers/" + signer["id"], {**SELECTORS, "enrollAuthPolicyId": policy})
        out["selectors set"] = _stored(api.signer(NAME), policy)
        out["selectors set, reopened"] = _reopen(page, zac, signer["id"])
        _saved(page, "PUT")
        out["saved unchanged"] = _stored(api.signer(NAME), policy)
        out["saved unchanged, reopened"] = _reopen(page, zac, signer["id"])
    out["writes"] = [f"{m} {path.replace(signer['id'], '{id}')} {st}" for m, path, st in answers
                     if m in ("POST", "PUT", "PATCH", "DELETE") and path.startswith(MGMT + "/external-jwt")]
    return out


def test_the_console_s_jwt_signer_form_keeps_every_field_as_openziti_2_does(console, ziti2, static_zac,  # noqa: F811
                                                                              tmp_path):
    version = Api(console.url, console.admin_user, console.admin_password).call("GET", "/version")["version"]
    if not version.startswith("v2."):
        pytest.skip(f"ziti-lite names {version} in /version: ZAC 4.5.1 shows its enrollment toggles to 2.x only")
    up = start_quickstart(ziti2, tmp_path / "openziti", "v2.0.3")
    try:
        theirs = signer_form(static_zac, up.url, up.admin_user, up.admin_password, name_controller=True)
    finally:
        up.stop()
    ours = signer_form(console.url, console.url, console.admin_user, console.admin_password, name_controller=False)
    Path(tmp_path / "signer-form.json").write_text(json.dumps({"ziti-lite": ours, "v2.0.3": theirs}, indent=1))
    # the scopes are a set to both (sorted), as the chips show them again
    shown = {**ENTERED, "useExternalId": True, "enrollToCertEnabled": True, "enrollToTokenEnabled": True,
             "enabled": True, "scopes": sorted(SCOPES), "targetToken": "ID"}
    assert all(ours["toggles shown"].values()), ours["toggles shown"]
    for step in ("created, reopened", "selectors set, reopened", "saved unchanged, reopened"):
        assert ours[step] == shown, (step, ours[step])
    for step in ("created", "selectors set", "saved unchanged"):
        assert {k: ours[step][k] for k in shown} == shown, (step, ours[step])
    assert {k: ours["selectors set"][k] for k in SELECTORS} == SELECTORS
    assert ours["selectors set"]["enrollAuthPolicyId"] == "<the policy made>"
    # the form's PUT has no selectors nor policy: both controllers put their defaults back
    assert (ours["saved unchanged"]["enrollNameClaimsSelector"], ours["saved unchanged"]["enrollAuthPolicyId"],
            "enrollAttributeClaimsSelector" in ours["saved unchanged"]) == ("/sub", "default", False)
    assert ours["writes"] == [f"POST {MGMT}/external-jwt-signers 201", f"PUT {MGMT}/external-jwt-signers/{{id}} 200"]
    assert ours["refused policy"]["status"] == 400, ours["refused policy"]
    assert set(ours) == set(theirs)
    for key in ours:   # every step's answer, stored signer and reopened form as v2.0.3's
        assert ours[key] == theirs[key], (key, ours[key], theirs[key])
