"""Hypothesis strategies for the built-in config types: configs that are valid by construction,
then 0-3 mutations of the kinds that separate a correct schema from a near miss (a key dropped
or added, a value of the wrong type, out of range, empty, repeated, a forward flag turned off).

``accepts(type_name, data)`` is the oracle: upstream's rules for each type written out by hand
as plain Python (OpenZiti 1.3.x, ``controller/db/migration_initialize.go``), independent of any
JSON-schema text. ``tests/data/upstream_config_verdicts.jsonl`` holds upstream's own validator's
verdicts (gojsonschema 1.2.0 on upstream's schemas) on configs drawn from these strategies; the
tests hold both the oracle and the API to them.
"""

from __future__ import annotations

import math
import re

from hypothesis import strategies as st

TYPES = ("ziti-tunneler-client.v1", "ziti-tunneler-server.v1", "intercept.v1", "host.v1", "host.v2")

# ---------------------------------------------------------------- valid building blocks
port = st.integers(0, 65535)
protocol = st.sampled_from(["tcp", "udp"])
address = st.one_of(st.sampled_from(["localhost", "10.0.0.0/8", "*.ziti", "::1", "web.ziti"]),
                    st.text(min_size=1, max_size=8))
duration = st.one_of(st.from_regex(r"\A[0-9]{1,3}(h|m|s|ms)\Z"), st.sampled_from(["5s", "x10ms!", "1h30m"]))


def distinct(elements, max_size=3):
    return st.lists(elements, min_size=1, max_size=max_size, unique_by=repr)


def optional(d: dict) -> st.SearchStrategy:
    """A dict with any subset of the given (key -> strategy) entries."""
    return st.fixed_dictionaries({}, optional=d)


port_range = st.fixed_dictionaries({"low": port, "high": port})
action = st.fixed_dictionaries(
    {"trigger": st.sampled_from(["fail", "pass", "change"]),
     "action": st.sampled_from(["mark healthy", "mark unhealthy", "increase cost 10", "decrease cost 5",
                                "send event", "please mark healthy now"])},
    optional={"consecutiveEvents": port, "duration": duration})
actions = st.lists(action, min_size=1, max_size=3)
port_check = st.fixed_dictionaries({"interval": duration, "timeout": duration, "address": st.text(max_size=6)},
                                   optional={"actions": actions})
http_check = st.fixed_dictionaries(
    {"interval": duration, "timeout": duration, "url": st.text(max_size=6)},
    optional={"method": st.sampled_from(["GET", "POST", "PUT", "PATCH"]), "body": st.text(max_size=4),
              "actions": actions, "expectStatus": st.integers(100, 599), "expectInBody": st.text(max_size=4)})
health = {"portChecks": st.lists(port_check, max_size=2), "httpChecks": st.lists(http_check, max_size=2)}
listen_options = optional({
    "connectTimeoutSeconds": st.integers(0, 2**31 - 1), "connectTimeout": duration,
    "maxConnections": st.integers(1, 10**6), "identity": st.text(max_size=6),
    "bindUsingEdgeIdentity": st.booleans(), "cost": port,
    "precedence": st.sampled_from(["default", "required", "failed"])})
proxy = st.fixed_dictionaries({"type": st.just("http"), "address": st.text(max_size=8)},
                              optional={"extra": st.integers()})  # proxy objects are open


@st.composite
def host_terminator(draw) -> dict:
    out = draw(optional({**health, "allowedSourceAddresses": distinct(address),
                         "listenOptions": listen_options, "proxy": proxy}))
    for fixed, flag, allowed, values in (("protocol", "forwardProtocol", "allowedProtocols", protocol),
                                         ("address", "forwardAddress", "allowedAddresses", address),
                                         ("port", "forwardPort", "allowedPortRanges", port_range)):
        if draw(st.booleans()):
            out[flag] = True
            out[allowed] = draw(distinct(values))
        else:
            out[fixed] = draw(values if fixed != "port" else port)
    return out


VALID = {
    "ziti-tunneler-client.v1": st.fixed_dictionaries({"hostname": st.text(max_size=8), "port": port}),
    "ziti-tunneler-server.v1": st.fixed_dictionaries({"hostname": st.text(max_size=8), "port": port},
                                                     optional={"protocol": protocol, **health}),
    "intercept.v1": st.fixed_dictionaries(
        {"protocols": distinct(protocol, 2), "addresses": distinct(address), "portRanges": distinct(port_range)},
        optional={"dialOptions": optional({"identity": st.text(max_size=6),
                                           "connectTimeoutSeconds": st.integers(0, 2**31 - 1)}),
                  "sourceIp": st.text(max_size=8)}),
    "host.v1": host_terminator(),
    "host.v2": st.fixed_dictionaries({"terminators": st.lists(host_terminator(), min_size=1, max_size=2)}),
}

# ---------------------------------------------------------------- mutations
junk = st.one_of(
    st.none(), st.booleans(), st.just(False), st.integers(-3, 3), st.sampled_from([-1, 65536, 2**31, 99, 600]),
    st.sampled_from([1.5, 80.0, -0.5]), st.sampled_from(["", "tcp", "udp", "sctp", "GET", "http", "5s", "x", "mark"]),
    st.just([]), st.just({}), st.lists(st.sampled_from(["tcp", "a", 1]), max_size=3),
)


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, path + (i,))


def _get(value, path):
    for p in path:
        value = value[p]
    return value


KEYS = ("protocol", "address", "port", "hostname", "forwardPort", "allowedPortRanges", "low", "high",
        "interval", "timeout", "trigger", "action", "identity", "extra", "terminators", "sourceIp", "type")


@st.composite
def mutated(draw, data):
    import copy
    data = copy.deepcopy(data)
    path = draw(st.sampled_from(list(_paths(data))))
    target = _get(data, path)
    choices = ["replace"] if path else []
    if isinstance(target, dict):
        choices += ["add"] + (["drop"] if target else [])
    if isinstance(target, list):
        choices += ["append_copy", "clear"] if target else ["clear"]
    kind = draw(st.sampled_from(choices))
    if kind == "replace":
        _get(data, path[:-1])[path[-1]] = draw(junk)
    elif kind == "add":
        target[draw(st.sampled_from(KEYS))] = draw(junk)
    elif kind == "drop":
        del target[draw(st.sampled_from(sorted(target)))]
    elif kind == "append_copy":
        target.append(copy.deepcopy(target[0]))
    else:
        target.clear()
    return data


@st.composite
def configs(draw, type_name):
    data = draw(VALID[type_name])
    for _ in range(draw(st.integers(0, 3))):
        data = draw(mutated(data))
    return data


# ---------------------------------------------------------------- the oracle
def _int(v, low, high=None) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        return False
    return v >= low and (high is None or v <= high)


def _str(v) -> bool:
    return isinstance(v, str)


def _obj(v, allowed: dict, required=()) -> bool:
    """v is an object with only the allowed keys, each passing its check, and the required ones."""
    return (isinstance(v, dict) and all(k in v for k in required)
            and all(k in allowed and allowed[k](x) for k, x in v.items()))


def _canon(v):
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return (type(v).__name__, v)
    if isinstance(v, (int, float)):
        return ("number", float(v))
    if isinstance(v, list):
        return ("array", tuple(_canon(x) for x in v))
    return ("object", tuple(sorted((k, _canon(x)) for k, x in v.items())))


def _set(v, item) -> bool:
    return (isinstance(v, list) and len(v) >= 1 and len({_canon(x) for x in v}) == len(v)
            and all(item(x) for x in v))


def _list(v, item, low=0, high=None) -> bool:
    return isinstance(v, list) and low <= len(v) and (high is None or len(v) <= high) and all(item(x) for x in v)


def _duration(v) -> bool:
    return _str(v) and re.search(r"[0-9]+(h|m|s|ms)", v) is not None


def _one_of(*values):
    return lambda v: any(_canon(v) == _canon(x) for x in values)


_port = lambda v: _int(v, 0, 65535)  # noqa: E731
_protocol = _one_of("tcp", "udp")
_address = lambda v: _str(v) and v != ""  # noqa: E731
_port_range = lambda v: _obj(v, {"low": _port, "high": _port}, ("low", "high"))  # noqa: E731
_action = lambda v: _obj(v, {  # noqa: E731
    "trigger": _one_of("fail", "pass", "change"), "consecutiveEvents": _port, "duration": _duration,
    "action": lambda a: _str(a) and re.search(
        r"(mark (un)?healthy|increase cost [0-9]+|decrease cost [0-9]+|send event)", a) is not None,
}, ("trigger", "action"))
_actions = lambda v: _list(v, _action, 1, 20)  # noqa: E731
_HEALTH = {
    "portChecks": lambda v: _list(v, lambda c: _obj(c, {
        "interval": _duration, "timeout": _duration, "address": _str, "actions": _actions},
        ("interval", "timeout", "address"))),
    "httpChecks": lambda v: _list(v, lambda c: _obj(c, {
        "url": _str, "method": _one_of("GET", "POST", "PUT", "PATCH"), "body": _str,
        "interval": _duration, "timeout": _duration, "actions": _actions,
        "expectStatus": lambda s: _int(s, 100, 599), "expectInBody": _str},
        ("interval", "timeout", "url"))),
}


def _terminator(v) -> bool:
    checks = {
        **_HEALTH,
        "protocol": _protocol, "forwardProtocol": _one_of(True),
        "allowedProtocols": lambda x: _set(x, _protocol),
        "address": _address, "forwardAddress": _one_of(True),
        "allowedAddresses": lambda x: _set(x, _address),
        "port": _port, "forwardPort": _one_of(True),
        "allowedPortRanges": lambda x: _set(x, _port_range),
        "allowedSourceAddresses": lambda x: _set(x, _address),
        "listenOptions": lambda x: _obj(x, {
            "connectTimeoutSeconds": lambda t: _int(t, 0, 2**31 - 1), "connectTimeout": _duration,
            "maxConnections": lambda m: _int(m, 1), "identity": _str,
            "bindUsingEdgeIdentity": lambda b: isinstance(b, bool), "cost": _port,
            "precedence": _one_of("default", "required", "failed")}),
        # the proxy object is open: only its two known keys are checked
        "proxy": lambda p: isinstance(p, dict) and "type" in p and "address" in p
                           and _one_of("http")(p["type"]) and _str(p["address"]),
    }
    if not _obj(v, checks):
        return False
    for fixed, flag, allowed in (("protocol", "forwardProtocol", "allowedProtocols"),
                                 ("address", "forwardAddress", "allowedAddresses"),
                                 ("port", "forwardPort", "allowedPortRanges")):
        if (v.get(flag) is True and allowed not in v) or (v.get(flag) is not True and fixed not in v):
            return False
    return True


def accepts(type_name: str, data) -> bool:
    """Whether upstream (OpenZiti 1.3.x) accepts ``data`` as a config of a built-in type."""
    if type_name == "ziti-tunneler-client.v1":
        return _obj(data, {"hostname": _str, "port": _port}, ("hostname", "port"))
    if type_name == "ziti-tunneler-server.v1":
        return _obj(data, {"hostname": _str, "port": _port, "protocol": _protocol, **_HEALTH},
                    ("hostname", "port"))
    if type_name == "intercept.v1":
        return _obj(data, {
            "protocols": lambda v: _set(v, _protocol),
            "addresses": lambda v: _set(v, _address),
            "portRanges": lambda v: _set(v, _port_range),
            "dialOptions": lambda v: _obj(v, {"identity": _str,
                                              "connectTimeoutSeconds": lambda t: _int(t, 0, 2**31 - 1)}),
            "sourceIp": _str,
        }, ("protocols", "addresses", "portRanges"))
    if type_name == "host.v1":
        return _terminator(data)
    if type_name == "host.v2":
        return _obj(data, {"terminators": lambda v: _list(v, _terminator, 1)}, ("terminators",))
    raise KeyError(type_name)
