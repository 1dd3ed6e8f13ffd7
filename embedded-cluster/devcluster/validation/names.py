"""String formats of the Kubernetes API: names, label keys and values, port names, keys.

Each function returns the API server's own explanations (empty when the value is valid),
so a caller wraps them in field errors exactly as apimachinery does. They follow
``k8s.io/apimachinery/pkg/util/validation/validation.go`` (``IsDNS1123Label``,
``IsDNS1123Subdomain``, ``IsDNS1035Label``, ``IsValidPortName``, ``IsConfigMapKey``,
``IsRelaxedEnvVarName``) and ``pkg/api/validate/content/kube.go`` (``IsLabelKey``,
``IsLabelValue``), messages included.
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
PORT_NAME_MAX = 15

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + "(\\." + _LABEL_FMT + ")*"
_DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_KEY_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _KEY_NAME_FMT + ")?"
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"

_LABEL = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN = re.compile(f"^{_SUBDOMAIN_FMT}$")
_DNS1035 = re.compile(f"^{_DNS1035_FMT}$")
_KEY_NAME = re.compile(f"^{_KEY_NAME_FMT}$")
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_CONFIG_KEY = re.compile(f"^{_CONFIG_KEY_FMT}$")
_PORT_CHARS = re.compile("^[-a-z0-9]+$")


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(message: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def inclusive_range_error(low: int, high: int) -> str:
    return f"must be between {low} and {high}, inclusive"


def _full(pattern: re.Pattern[str], value: str) -> bool:
    return pattern.fullmatch(value) is not None and "\n" not in value


def dns1123_label(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_LABEL_MAX:
        errors.append(max_len_error(DNS1123_LABEL_MAX))
    if not _full(_LABEL, value):
        if _full(_SUBDOMAIN, value):
            errors.append("must not contain dots")
        else:
            errors.append(
                regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                    "characters or '-', and must start and end with an alphanumeric character",
                    _LABEL_FMT,
                    "my-name",
                    "123-abc",
                )
            )
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errors.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _full(_SUBDOMAIN, value):
        errors.append(
            regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                _SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errors


def dns1035_label(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_LABEL_MAX:
        errors.append(max_len_error(DNS1123_LABEL_MAX))
    if not _full(_DNS1035, value):
        errors.append(
            regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
                _DNS1035_FMT,
                "my-name",
                "abc-123",
            )
        )
    return errors


_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character"
)


def label_key(value: str) -> list[str]:
    """``IsLabelKey`` (a "qualified name"): ``[prefix/]name``."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += ["prefix part " + m for m in dns1123_subdomain(prefix)]
    else:
        return [
            "a valid label key "
            + regex_error(_KEY_MSG, _KEY_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > LABEL_VALUE_MAX:
        errors.append("name part " + max_len_error(LABEL_VALUE_MAX))
    if not _full(_KEY_NAME, name):
        errors.append(
            "name part " + regex_error(_KEY_MSG, _KEY_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value(value: str) -> list[str]:
    errors = []
    if len(value) > LABEL_VALUE_MAX:
        errors.append(max_len_error(LABEL_VALUE_MAX))
    if not _full(_LABEL_VALUE, value):
        errors.append(
            regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errors


def port_name(value: str) -> list[str]:
    """``IsValidPortName``: an IANA_SVC_NAME (RFC 6335), lower case only."""
    errors = []
    if len(value) > PORT_NAME_MAX:
        errors.append(max_len_error(PORT_NAME_MAX))
    if not _full(_PORT_CHARS, value):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", value):
        errors.append("must contain at least one letter (a-z)")
    if "--" in value:
        errors.append("must not contain consecutive hyphens")
    if value and (value[0] == "-" or value[-1] == "-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def port_number(value: int) -> list[str]:
    return [] if 1 <= value <= 65535 else [inclusive_range_error(1, 65535)]


def _chdir_prefix(value: str) -> list[str]:
    if value == ".":
        return ["must not be '.'"]
    if value == "..":
        return ["must not be '..'"]
    if value.startswith(".."):
        return ["must not start with '..'"]
    return []


def config_map_key(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errors.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _full(_CONFIG_KEY, value):
        errors.append(
            regex_error(
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                _CONFIG_KEY_FMT,
                "key.name",
                "KEY_NAME",
                "key-name",
            )
        )
    return errors + _chdir_prefix(value)


def env_var_name(value: str) -> list[str]:
    """``IsRelaxedEnvVarName`` (the rule since Kubernetes 1.34): printable ASCII but '='."""
    if not value:
        return ["environment variable name must be non-empty"]
    if any(ord(c) > 126 or ord(c) < 32 or c == "=" for c in value):
        return [
            "a valid environment variable name must consist only of printable ASCII "
            "characters other than '='"
        ]
    return []
