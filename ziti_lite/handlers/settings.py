"""Controller settings (``/controller-settings``): in OpenZiti 2.0's management API and not
implemented by its controller.

Upstream v2.0.3's spec declares seven operations for per-controller settings (the OIDC redirect
and post-logout URIs), and its controller registers no handler for any of them: each answers
go-swagger's 501 once the caller's session and the body pass. ziti-lite declares them the same
way, so clients and the served spec see upstream's API; what these settings would hold, ziti-lite
takes from ``serve``'s ``--oidc-redirect-uri`` and ``--oidc-post-logout-uri`` (``oidc/``).
"""

from __future__ import annotations

import msgspec

from ..api.ops import not_implemented
from ..resources.common import Body, Tags


class OidcSettings(Body):
    redirect_uris: list[str] | None = None
    post_logout_uris: list[str] | None = None


class ControllerSettingCreate(Body):
    controller_id: str
    oidc: OidcSettings | None = None
    tags: Tags | None = None


class ControllerSettingUpdate(Body):
    oidc: OidcSettings | None = None
    tags: Tags | None = None


# upstream's controllerSettingPatch has the fields of its update, none required
ControllerSettingPatch = msgspec.defstruct("ControllerSettingPatch", [], bases=(ControllerSettingUpdate,))

_ONE = "/controller-settings/{id}"
_EFFECTIVE = "/controller-settings/{id}/effective"
# (method, path, operationId, body, go-swagger's name of the operation)
OPERATIONS: tuple[tuple[str, str, str, type | None, str], ...] = (
    ("GET", "/controller-settings", "listControllerSettings", None, "settings.ListControllerSettings"),
    ("POST", "/controller-settings", "createControllerSetting", ControllerSettingCreate,
     "settings.CreateControllerSetting"),
    ("GET", _ONE, "detailControllerSetting", None, "settings.DetailControllerSetting"),
    ("GET", _EFFECTIVE, "detailControllerSettingEffective", None, "settings.DetailControllerSettingEffective"),
    ("PUT", _EFFECTIVE, "updateControllerSetting", ControllerSettingUpdate, "settings.UpdateControllerSetting"),
    ("PATCH", _EFFECTIVE, "patchControllerSetting", ControllerSettingPatch, "settings.PatchControllerSetting"),
    ("DELETE", _EFFECTIVE, "deleteControllerSetting", None, "settings.DeleteControllerSetting"),
)

for _method, _path, _op_id, _body, _name in OPERATIONS:
    not_implemented(_method, _path, apis=("management",), auth="session", op_id=_op_id, name=_name,
                    tag="controller-settings", body=_body, body_name="controllerSetting",
                    query=("limit", "offset", "filter") if _op_id == "listControllerSettings" else ())
