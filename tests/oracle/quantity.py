"""Kubernetes resource quantities, exactly, with fractions (used only by the test oracle).

A quantity is ``<signed decimal><suffix>`` where the suffix is a binary SI suffix (``Ki`` ..
``Ei``), a decimal SI suffix (``n u m k M G T P E`` or none) or a decimal exponent (``e3``).
JSON numbers are accepted as they are.
"""

import re
from fractions import Fraction

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_SUFFIX = r"[eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E"
_QUANTITY = re.compile(rf"^({_NUMBER})({_SUFFIX})?$")

_MULTIPLIERS = {
    None: Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def parse_quantity(value):
    """Exact value of a quantity (JSON int, float or string), or None when it does not parse."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        value = repr(value)
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value)
    if match is None:
        return None
    number, suffix = match.groups()
    if suffix is not None and suffix[0] in "eE" and len(suffix) > 1:
        return Fraction(number) * Fraction(10) ** int(suffix[1:])
    return Fraction(number) * _MULTIPLIERS[suffix]


def quantity_int(value):
    """The quantity as an int64 when it is a whole number in range, else None (Go ``AsInt64``)."""
    exact = parse_quantity(value)
    if exact is None or exact.denominator != 1:
        return None
    if not INT64_MIN <= exact.numerator <= INT64_MAX:
        return None
    return exact.numerator
