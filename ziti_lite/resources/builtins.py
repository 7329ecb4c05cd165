"""Rows every fresh controller has: built-in config types (upstream's fixed ids) and posture
check types. The JSON schemas are ziti-lite's own statement of each config format."""

from __future__ import annotations

_port = {"type": "integer", "minimum": 0, "maximum": 65535}
_protocol = {"type": "string", "enum": ["tcp", "udp"]}
_port_range = {"type": "object", "required": ["low", "high"], "additionalProperties": False,
               "properties": {"low": _port, "high": _port}}
_inhabited = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}
_host_v1 = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "protocol": _protocol, "forwardProtocol": {"type": "boolean"},
        "allowedProtocols": {"type": "array", "items": _protocol, "minItems": 1},
        "address": {"type": "string", "minLength": 1}, "forwardAddress": {"type": "boolean"},
        "allowedAddresses": _inhabited,
        "allowedSourceAddresses": _inhabited,
        "port": _port, "forwardPort": {"type": "boolean"},
        "allowedPortRanges": {"type": "array", "items": _port_range, "minItems": 1},
        "listenOptions": {"type": "object"},
        "httpChecks": {"type": "array"}, "portChecks": {"type": "array"},
    },
    "allOf": [
        {"if": {"properties": {"forwardProtocol": {"const": True}}, "required": ["forwardProtocol"]},
         "then": {"required": ["allowedProtocols"]}, "else": {"required": ["protocol"]}},
        {"if": {"properties": {"forwardAddress": {"const": True}}, "required": ["forwardAddress"]},
         "then": {"required": ["allowedAddresses"]}, "else": {"required": ["address"]}},
        {"if": {"properties": {"forwardPort": {"const": True}}, "required": ["forwardPort"]},
         "then": {"required": ["allowedPortRanges"]}, "else": {"required": ["port"]}},
    ],
}

CONFIG_TYPES = (
    ("f2dd2df0-9c04-4b84-a91e-71437ac229f1", "ziti-tunneler-client.v1", {
        "type": "object", "required": ["hostname", "port"], "additionalProperties": False,
        "properties": {"hostname": {"type": "string"}, "port": _port}}),
    ("cea49285-6c07-42cf-9f52-09a9b115c783", "ziti-tunneler-server.v1", {
        "type": "object", "required": ["hostname", "port"], "additionalProperties": False,
        "properties": {"hostname": {"type": "string"}, "port": _port, "protocol": _protocol,
                       "httpChecks": {"type": "array"}, "portChecks": {"type": "array"}}}),
    ("g7cIWbcGg", "intercept.v1", {
        "type": "object", "required": ["protocols", "addresses", "portRanges"], "additionalProperties": False,
        "properties": {
            "protocols": {"type": "array", "items": _protocol, "minItems": 1},
            "addresses": _inhabited,
            "portRanges": {"type": "array", "items": _port_range, "minItems": 1},
            "dialOptions": {"type": "object"},
            "sourceIp": {"type": "string"},
        }}),
    ("NH5p4FpGR", "host.v1", _host_v1),
    ("host.v2", "host.v2", {
        "type": "object", "required": ["terminators"], "additionalProperties": False,
        "properties": {"terminators": {"type": "array", "items": _host_v1, "minItems": 1}}}),
)

_oses = {
    "Windows": ["Vista", "7", "8", "10", "2000"], "Linux": ["4.14", "4.19", "5.4", "5.9"],
    "Android": ["9", "10", "11"], "macOS": ["10.15", "11.0"], "iOS": ["11", "12"],
}


def _os(*names, empty=False):
    return [{"type": n, "versions": [] if empty else _oses[n]} for n in names]


POSTURE_CHECK_TYPES = (
    ("OS", "Operating System Check", _os("Windows", "Linux", "Android", "macOS", "iOS")),
    ("PROCESS", "Process Check", _os("Windows", "macOS", "Linux")),
    ("DOMAIN", "Windows Domain Check", _os("Windows")),
    ("MAC", "MAC Address Check", _os("Windows", "Linux", "macOS", "Android")),
    ("PROCESS_MULTI", "Process Multi Check", _os("Windows", "macOS", "Linux", empty=True)),
)
