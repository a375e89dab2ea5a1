"""SCIM PATCH (RFC 7644 §3.5.2) applied to a resource as JSON: a pure function from the
resource and the PatchOp message to the resource patched.

Written for what providers send, which is looser than the RFC: Entra ID capitalises
operations (`Replace`), removes group members by listing them in `value` or by a
filter path (`members[value eq "…"]`), and sets e-mails through a filtered path
(`emails[type eq "work"].value`); Okta replaces without a path
(`{"value": {"active": false}}`) and replaces all of a group's members at once. Paths
may carry a schema's URN, attribute names are matched without regard to case, and a
filtered path that matches nothing on `add` or `replace` adds the element it describes
(what Entra expects when it first sets an address). The caller maps the result back to
its own fields, so attributes it does not keep pass through harmlessly.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from llmgw.identity.scim.errors import ScimError

PATCH_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
CORE_SCHEMAS = (
    "urn:ietf:params:scim:schemas:core:2.0:user",
    "urn:ietf:params:scim:schemas:core:2.0:group",
)
EXTENSION_SCHEMAS = ("urn:ietf:params:scim:schemas:extension:enterprise:2.0:user",)
_OPS = frozenset({"add", "remove", "replace"})
_PATH = re.compile(
    r"^(?:(?P<urn>urn:[^\[\]]+):)?(?P<attr>[A-Za-z][\w$-]*)(?:\[(?P<filter>[^\]]*)\])?(?:\.(?P<sub>[A-Za-z][\w$-]*))?$"
)
_VALUE_FILTER = re.compile(
    r'^\s*(?P<attr>[A-Za-z][\w$-]*)\s+eq\s+"(?P<value>(?:[^"\\]|\\.)*)"\s*$', re.IGNORECASE
)
# The names a new key is written under whatever case the provider used, so the caller
# finds `active` whether it came as `Active` or `active`.
_CANONICAL = {
    name.lower(): name
    for name in (
        "userName",
        "name",
        "displayName",
        "emails",
        "externalId",
        "active",
        "members",
        "givenName",
        "familyName",
        "formatted",
        "value",
        "type",
        "primary",
        "display",
    )
}

Resource = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Path:
    urn: str | None
    attribute: str
    filter: tuple[str, str] | None
    sub: str | None


def parse_path(text: str) -> Path:
    """An operation's `path`: `[urn:…:]attribute[filter][.sub]`; 400 invalidPath otherwise."""
    match = _PATH.match(text.strip())
    if match is None:
        raise ScimError(
            400,
            f'path {text!r} is not an attribute path like name.givenName or members[value eq "id"]',
            "invalidPath",
        )
    urn = match["urn"]
    if urn is not None and urn.lower() in CORE_SCHEMAS:
        urn = None
    value_filter = None
    if match["filter"] is not None:
        inner = _VALUE_FILTER.match(match["filter"])
        if inner is None:
            raise ScimError(
                400,
                f'path {text!r}: the filter in brackets must be one sub-attribute eq "value"',
                "invalidPath",
            )
        value_filter = (inner["attr"], inner["value"].replace('\\"', '"').replace("\\\\", "\\"))
    return Path(urn, match["attr"], value_filter, match["sub"])


def apply_patch(resource: Resource, message: Any) -> Resource:
    """`resource` with the operations of the PatchOp `message` applied, in order; the
    argument is left as it was. `ScimError` 400 for a message that is not one."""
    if not isinstance(message, dict):
        raise ScimError(400, "a PATCH body is a JSON object with Operations", "invalidSyntax")
    operations = _get(message, "Operations")
    if not isinstance(operations, list) or not operations:
        raise ScimError(
            400, "a PATCH body needs Operations: a non-empty list of {op, path, value}", "invalidSyntax"
        )
    patched = copy.deepcopy(resource)
    for index, operation in enumerate(operations):
        if not isinstance(operation, dict):
            raise ScimError(
                400, f"Operations[{index}] is not an object with op, path and value", "invalidSyntax"
            )
        op = _get(operation, "op")
        if not isinstance(op, str) or op.lower() not in _OPS:
            raise ScimError(
                400, f"Operations[{index}].op is {op!r}: use add, remove or replace", "invalidSyntax"
            )
        path = _get(operation, "path")
        if path is not None and not isinstance(path, str):
            raise ScimError(400, f"Operations[{index}].path must be a string", "invalidPath")
        _apply(patched, op.lower(), path or None, _get(operation, "value"))
    return patched


def _apply(resource: Resource, op: str, path: str | None, value: Any) -> None:
    if path is None:
        if op == "remove":
            raise ScimError(400, "remove needs a path: the attribute to remove", "noTarget")
        if not isinstance(value, dict):
            raise ScimError(
                400, f"{op} without a path needs an object of attributes as its value", "invalidValue"
            )
        for key, item in value.items():
            if key.lower() in EXTENSION_SCHEMAS and isinstance(item, dict):
                for sub_key, sub_item in item.items():
                    _apply(resource, op, f"{key}:{sub_key}", sub_item)
            elif key.lower() in CORE_SCHEMAS and isinstance(item, dict):
                _apply(resource, op, None, item)
            else:
                _apply(resource, op, key, item)
        return
    target = parse_path(path)
    container = resource
    if target.urn is not None:
        extension = resource.setdefault(_key(resource, target.urn), {})
        if not isinstance(extension, dict):
            raise ScimError(400, f"path {path!r}: {target.urn} is not an object", "invalidPath")
        container = extension
    key = _key(container, target.attribute)
    if target.filter is not None:
        _apply_filtered(container, key, op, target, value, path)
    elif target.sub is not None:
        _apply_sub(container, key, op, target.sub, value, path)
    else:
        _apply_attribute(container, key, op, value)


def _apply_attribute(container: Resource, key: str, op: str, value: Any) -> None:
    current = container.get(key)
    if op == "remove":
        if isinstance(current, list) and isinstance(value, list):
            # Entra ID's way to remove some members: name them in the value.
            gone = [_identity(item) for item in value]
            container[key] = [item for item in current if _identity(item) not in gone]
        else:
            container.pop(key, None)
        return
    if isinstance(current, list) or isinstance(value, list):
        items = value if isinstance(value, list) else [value]
        if op == "replace" or not isinstance(current, list):
            container[key] = list(items)
        else:
            known = [_identity(item) for item in current]
            container[key] = current + [item for item in items if _identity(item) not in known]
    elif isinstance(current, dict) and isinstance(value, dict):
        # A complex attribute: the sub-attributes given change, the others stay.
        for sub_key, sub_value in value.items():
            current[_key(current, sub_key)] = sub_value
    else:
        container[key] = value


def _apply_sub(container: Resource, key: str, op: str, sub: str, value: Any, path: str) -> None:
    current = container.get(key)
    if current is None:
        if op == "remove":
            return
        current = container[key] = {}
    if not isinstance(current, dict):
        raise ScimError(400, f"path {path!r}: {key} has no sub-attribute {sub}", "invalidPath")
    if op == "remove":
        current.pop(_key(current, sub), None)
    else:
        current[_key(current, sub)] = value


def _apply_filtered(container: Resource, key: str, op: str, target: Path, value: Any, path: str) -> None:
    assert target.filter is not None
    attribute, wanted = target.filter
    items = container.get(key)
    if items is None:
        items = []
    if not isinstance(items, list):
        raise ScimError(400, f"path {path!r}: {key} is not multi-valued", "invalidPath")
    matches = [
        item for item in items if isinstance(item, dict) and _equal(item.get(_key(item, attribute)), wanted)
    ]
    if op == "remove":
        if target.sub is None:
            container[key] = [item for item in items if not any(item is match for match in matches)]
        else:
            for match in matches:
                match.pop(_key(match, target.sub), None)
        return
    if not matches:
        added: Resource = {_key({}, attribute): wanted}
        items.append(added)
        matches = [added]
    container[key] = items
    for match in matches:
        if target.sub is not None:
            match[_key(match, target.sub)] = value
        elif isinstance(value, dict):
            for sub_key, sub_value in value.items():
                match[_key(match, sub_key)] = sub_value
        else:
            raise ScimError(400, f"path {path!r} names elements: give an object as the value", "invalidValue")


def _key(container: Resource, name: str) -> str:
    """The key `name` is held under in `container`, matched without case; a new one
    takes the canonical spelling."""
    lowered = name.lower()
    for existing in container:
        if existing.lower() == lowered:
            return existing
    return _CANONICAL.get(lowered, name)


def _get(mapping: Resource, name: str) -> Any:
    return mapping.get(_key(mapping, name))


def _identity(item: Any) -> Any:
    """What makes an element of a multi-valued attribute the same as another: its
    `value` when it has one (a member's id, an address)."""
    if isinstance(item, dict):
        found = _get(item, "value")
        if found is not None:
            return found
        return sorted(item.items())
    return item


def _equal(have: Any, wanted: str) -> bool:
    if isinstance(have, bool):
        return str(have).lower() == wanted.lower()
    return isinstance(have, str) and have.lower() == wanted.lower()
