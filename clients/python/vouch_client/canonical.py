"""RFC 8785 (JSON Canonicalization Scheme): the bytes every vouch signature covers.

Object members sorted by the UTF-16 code units of their names, strings escaped as
ECMAScript's JSON.stringify does, every number written as the IEEE double it denotes in
ECMAScript's shortest form (so 2**64 is 18446744073709552000 and 1e21 is 1e+21).
"""

import math
from decimal import Decimal

_EXACT_INT_MAX = 2 ** 53

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def canonical(value):
    """The canonical JSON text of `value` (dict, list, str, int, float, bool, None)."""
    out = []
    _write(value, out)
    return "".join(out)


def canonical_bytes(value):
    return canonical(value).encode("utf-8")


def _write(value, out):
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, (int, float)):
        out.append(_number(value))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _write(v, out)
        out.append("]")
    elif isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise TypeError(f"object member names must be strings, not {type(k).__name__}")
        out.append("{")
        for i, k in enumerate(sorted(value, key=_utf16)):
            if i:
                out.append(",")
            out.append(_string(k))
            out.append(":")
            _write(value[k], out)
        out.append("}")
    else:
        raise TypeError(f"{type(value).__name__} is not a JSON value")


def _utf16(key):
    return key.encode("utf-16-be", "surrogatepass")


def _string(s):
    parts = ['"']
    for c in s:
        if c in _ESCAPES:
            parts.append(_ESCAPES[c])
        elif c < " ":
            parts.append("\\u%04x" % ord(c))
        elif "\ud800" <= c <= "\udfff":
            raise ValueError("a lone surrogate is not text and cannot be signed")
        else:
            parts.append(c)
    parts.append('"')
    return "".join(parts)


def _number(n):
    if isinstance(n, int):
        if abs(n) <= _EXACT_INT_MAX:
            return str(n)
        try:
            n = float(n)
        except OverflowError:
            raise ValueError("an integer beyond the range of a double cannot be signed") from None
    if not math.isfinite(n):
        raise ValueError("NaN and infinities are not JSON numbers")
    if n == 0:
        return "0"
    sign = "-" if n < 0 else ""
    # repr is the shortest text that reads back as the same double: its digits and exponent.
    digits, exponent = _shortest(abs(n))
    k = len(digits)
    e = exponent + k  # the value is 0.DIGITS × 10^e
    if k <= e <= 21:
        body = digits + "0" * (e - k)
    elif 0 < e <= 21:
        body = digits[:e] + "." + digits[e:]
    elif -6 < e <= 0:
        body = "0." + "0" * (-e) + digits
    else:
        x = e - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = mantissa + "e" + ("+" if x >= 0 else "-") + str(abs(x))
    return sign + body


def _shortest(f):
    t = Decimal(repr(f)).as_tuple()
    digits = "".join(map(str, t.digits)).lstrip("0")
    exponent = t.exponent
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    return stripped, exponent
