"""Rows every fresh controller has: the built-in config types and posture check types.

The config types are upstream's five (OpenZiti 1.3.x), under upstream's fixed ids and with
schemas of upstream's shape: a ``$id``, shared ``definitions`` referenced by ``$ref``, sets
written as ``allOf: [inhabitedSet, {items: ...}]`` and the ``forward*`` alternatives as
``allOf`` of ``if/then/else``. Schema-driven clients (the admin console's config forms) read
that shape, and the constraints are the ones upstream's schemas enforce: the same configs
validate and the same are refused. The schema text here is ziti-lite's own; descriptions are
short summaries.

``formats`` are annotations only (upstream's validator does not know ``idn-hostname`` and lets
every string through; ours is run without a format checker), so an address is any non-empty
string.
"""

from __future__ import annotations

import copy

from ..policy.posture_checks import TYPES as POSTURE_TYPES

UINT16 = 65535
INT32 = 2147483647


def _ref(name: str, description: str | None = None) -> dict:
    out: dict = {"$ref": f"#/definitions/{name}"}
    if description:
        out["description"] = description
    return out


def _set_of(item: str, description: str | None = None) -> dict:
    """A non-empty array of distinct items of a definition (upstream's inhabited-set form)."""
    out: dict = {"allOf": [_ref("inhabitedSet"), {"items": _ref(item)}]}
    if description:
        out["description"] = description
    return out


def _integer(low: int, high: int | None = None) -> dict:
    out: dict = {"type": "integer", "minimum": low}
    if high is not None:
        out["maximum"] = high
    return out


def _object(properties: dict, required: tuple[str, ...] = ()) -> dict:
    out: dict = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        out["required"] = list(required)
    return out


# -- health checks (ziti-tunneler-server.v1, host.v1, host.v2) ------------------------------
_HEALTH_DEFINITIONS = {
    "duration": {"type": "string", "pattern": "[0-9]+(h|m|s|ms)"},
    "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH"]},
    "action": _object({
        "trigger": {"type": "string", "enum": ["fail", "pass", "change"]},
        "consecutiveEvents": _integer(0, UINT16),
        "duration": _ref("duration"),
        "action": {"type": "string",
                   "pattern": "(mark (un)?healthy|increase cost [0-9]+|decrease cost [0-9]+|send event)"},
    }, required=("trigger", "action")),
    "actionList": {"type": "array", "items": _ref("action"), "minItems": 1, "maxItems": 20},
    "portCheck": _object({
        "interval": _ref("duration"),
        "timeout": _ref("duration"),
        "address": {"type": "string"},
        "actions": _ref("actionList"),
    }, required=("interval", "timeout", "address")),
    "httpCheck": _object({
        "url": {"type": "string"},
        "method": _ref("method"),
        "body": {"type": "string"},
        "interval": _ref("duration"),
        "timeout": _ref("duration"),
        "actions": _ref("actionList"),
        "expectStatus": _integer(100, 599),
        "expectInBody": {"type": "string"},
    }, required=("interval", "timeout", "url")),
    "portCheckList": {"type": "array", "items": _ref("portCheck")},
    "httpCheckList": {"type": "array", "items": _ref("httpCheck")},
}
_HEALTH_PROPERTIES = {"portChecks": _ref("portCheckList"), "httpChecks": _ref("httpCheckList")}

# -- addresses, ports, protocols (intercept.v1, host.v1, host.v2) ---------------------------
_ADDRESS_NOTE = ("an ip address, cidr, wildcard domain or host name; validated only as a "
                 "non-empty string, clients tell them apart when they parse it")
_TUNNEL_DEFINITIONS = {
    "dialAddress": {"type": "string", "format": "idn-hostname", "not": {"pattern": "^$"}},
    "listenAddress": {"type": "string", "format": "idn-hostname", "not": {"pattern": "^$"},
                      "description": _ADDRESS_NOTE},
    "inhabitedSet": {"type": "array", "minItems": 1, "uniqueItems": True},
    "portNumber": _integer(0, UINT16),
    "portRange": {"type": "object", "additionalProperties": False,
                  "properties": {"low": _ref("portNumber"), "high": _ref("portNumber")},
                  "required": ["low", "high"]},
    "protocolName": {"type": "string", "enum": ["tcp", "udp"]},
    "timeoutSeconds": _integer(0, INT32),
    "proxyType": {"type": "string", "enum": ["http"], "description": "proxy types supported"},
    "proxyConfiguration": {
        "type": "object",
        "required": ["type", "address"],
        "properties": {
            "type": _ref("proxyType", "kind of proxy"),
            "address": {"type": "string", "description": "the proxy as host:port"},
        },
    },
}


def _forward_flag(what: str) -> dict:
    return {"type": "boolean", "enum": [True],
            "description": f"dial the {what} the client tunneler intercepted (instead of '{what}')"}


def _either(flag: str, then: str, otherwise: str) -> dict:
    """``flag: true`` requires ``then``; without it ``otherwise`` is required."""
    return {"if": {"properties": {flag: {"const": True}}, "required": [flag]},
            "then": {"required": [then]}, "else": {"required": [otherwise]}}


# host.v1 without its $id and definitions: also host.v2's terminator
_HOST_TERMINATOR = {
    "type": "object",
    "properties": {
        **_HEALTH_PROPERTIES,
        "protocol": _ref("protocolName", "protocol to dial for a client's connection"),
        "forwardProtocol": _forward_flag("protocol"),
        "allowedProtocols": _set_of("protocolName", "protocols that may be forwarded"),
        "address": _ref("dialAddress", "ip address or host name to dial for a client's connection"),
        "forwardAddress": _forward_flag("address"),
        "allowedAddresses": _set_of("listenAddress", "addresses that may be forwarded"),
        "port": _ref("portNumber", "port to dial for a client's connection"),
        "forwardPort": _forward_flag("port"),
        "allowedPortRanges": _set_of("portRange", "ports that may be forwarded"),
        "allowedSourceAddresses": _set_of(
            "listenAddress", "source addresses the hosting tunneler routes locally so binding succeeds"
        ),
        "listenOptions": _object(
            {
                "connectTimeoutSeconds": {
                    **_ref("timeoutSeconds", "use connectTimeout (default 5)"),
                    "deprecated": True,
                },
                "connectTimeout": _ref(
                    "duration", "timeout of outbound connections (default '5s'); wins over connectTimeoutSeconds"
                ),
                "maxConnections": {"type": "integer", "minimum": 1, "description": "default 3"},
                "identity": {
                    "type": "string",
                    "description": "identity of the hosting terminator; '$tunneler_id.name' and "
                    "'$tunneler_id.tag[name]' are replaced by the hosting tunneler's",
                },
                "bindUsingEdgeIdentity": {"type": "boolean", "description": "same as identity: '$tunneler_id.name'"},
                "cost": {"type": "integer", "minimum": 0, "maximum": UINT16, "description": "default 0"},
                "precedence": {
                    "type": "string",
                    "enum": ["default", "required", "failed"],
                    "description": "default 'default'",
                },
            }
        ),
        "proxy": _ref("proxyConfiguration", "send outbound connections through this proxy"),
    },
    "additionalProperties": False,
    "allOf": [
        _either("forwardProtocol", "allowedProtocols", "protocol"),
        _either("forwardAddress", "allowedAddresses", "address"),
        _either("forwardPort", "allowedPortRanges", "port"),
    ],
}

_HOST_DEFINITIONS = {**_HEALTH_DEFINITIONS, **_TUNNEL_DEFINITIONS}

_SCHEMAS = "http://edge.openziti.org/schemas/"
_NETFOUNDRY = "http://ziti-edge.netfoundry.io/schemas/"

TUNNELER_CLIENT_V1 = {
    "$id": _SCHEMAS + "ziti-tunneler-client.v1.config.json",
    **_object({"hostname": {"type": "string"}, "port": _integer(0, UINT16)}, required=("hostname", "port")),
}

TUNNELER_SERVER_V1 = {
    "$id": _SCHEMAS + "ziti-tunneler-server.v1.config.json",
    "definitions": _HEALTH_DEFINITIONS,
    **_object(
        {
            "protocol": {"type": ["string", "null"], "enum": ["tcp", "udp"]},
            "hostname": {"type": "string"},
            "port": _integer(0, UINT16),
            **_HEALTH_PROPERTIES,
        },
        required=("hostname", "port"),
    ),
}

INTERCEPT_V1 = {
    "$id": _SCHEMAS + "intercept.v1.config.json",
    "definitions": _TUNNEL_DEFINITIONS,
    **_object(
        {
            "protocols": _set_of("protocolName"),
            "addresses": _set_of("listenAddress"),
            "portRanges": _set_of("portRange"),
            "dialOptions": _object(
                {
                    "identity": {
                        "type": "string",
                        "description": "dial the terminator of this identity; '$dst_protocol', '$dst_ip' "
                        "and '$dst_port' are replaced by the intercepted destination's",
                    },
                    "connectTimeoutSeconds": _ref(
                        "timeoutSeconds", "5 without dialOptions, 15 with dialOptions but without this"
                    ),
                }
            ),
            "sourceIp": {
                "type": "string",
                "description": "source ip (and optional :port) the hosting tunneler sends from; "
                "'$tunneler_id.name', '$tunneler_id.tag[name]', '$src_ip', '$src_port' "
                "and '$dst_port' are replaced by the client's values",
            },
        },
        required=("protocols", "addresses", "portRanges"),
    ),
}

HOST_V1 = {
    "$id": _NETFOUNDRY + "host.v1.schema.json",
    "definitions": _HOST_DEFINITIONS,
    **_HOST_TERMINATOR,
}

HOST_V2 = {
    "$id": _NETFOUNDRY + "host.v2.schema.json",
    "definitions": {
        **_HOST_DEFINITIONS,
        "terminator": _HOST_TERMINATOR,
        "terminatorList": {"type": "array", "minItems": 1, "items": _ref("terminator")},
    },
    **_object({"terminators": _ref("terminatorList")}, required=("terminators",)),
}

# (id, name, schema): upstream's ids, in upstream's order of creation
CONFIG_TYPES = tuple(
    (id, name, copy.deepcopy(schema))
    for id, name, schema in (
        ("f2dd2df0-9c04-4b84-a91e-71437ac229f1", "ziti-tunneler-client.v1", TUNNELER_CLIENT_V1),
        ("cea49285-6c07-42cf-9f52-09a9b115c783", "ziti-tunneler-server.v1", TUNNELER_SERVER_V1),
        ("g7cIWbcGg", "intercept.v1", INTERCEPT_V1),
        ("NH5p4FpGR", "host.v1", HOST_V1),
        ("host.v2", "host.v2", HOST_V2),
    )
)

# (id, name, operatingSystems) of the posture-check-types rows
POSTURE_CHECK_TYPES = tuple((t.id, t.name, t.operating_systems()) for t in POSTURE_TYPES.values() if t.name)
