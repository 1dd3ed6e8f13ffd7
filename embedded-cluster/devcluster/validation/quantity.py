"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1e3``), parsed exactly.

A quantity that does not parse never reaches validation on a real cluster: the API
server fails to decode the request body and answers 400 ``BadRequest`` ("... cannot be
handled as a Deployment: quantities must match the regular expression ..."). Parsed
values are exact fractions so ``requests <= limits`` compares ``1500m`` with ``1.5`` the
way ``resource.Quantity.Cmp`` does. Grammar and messages follow
``k8s.io/apimachinery/pkg/api/resource/quantity.go`` (``ParseQuantity``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

FORMAT_WRONG = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
NUMERIC = "unable to parse numeric part of quantity"
SUFFIX = "unable to parse quantity's suffix"

_SPLIT = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_NUMBER = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$")
_BINARY = {"Ki": 10, "Mi": 20, "Ti": 40, "Gi": 30, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
MAX_LENGTH = 256  # bounded work on hostile input; real quantities are a few characters


def _power_of_ten(exponent: int) -> Fraction:
    return Fraction(10**exponent) if exponent >= 0 else Fraction(1, 10**-exponent)


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity (the message is the API server's)."""


def parse_quantity(value: object) -> Fraction:
    """The exact value of a quantity given as a JSON string or number."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(FORMAT_WRONG)
    if isinstance(value, float) and not math.isfinite(value):
        raise QuantityError(FORMAT_WRONG)
    if isinstance(value, int | float):
        return Fraction(value)
    text = value.strip()
    if not text or len(text) > MAX_LENGTH:
        raise QuantityError(FORMAT_WRONG)
    match = _SPLIT.match(text)
    if not match:
        raise QuantityError(FORMAT_WRONG)
    number, suffix = match[1], match[2]
    if not _NUMBER.match(number):
        raise QuantityError(NUMERIC)
    base = Fraction(number)
    if suffix in _BINARY:
        return base * Fraction(2 ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return base * _power_of_ten(_DECIMAL[suffix])
    exponent = _EXPONENT.match(suffix)
    if exponent and abs(int(exponent[1])) <= 1000:
        return base * _power_of_ten(int(exponent[1]))
    raise QuantityError(SUFFIX)
