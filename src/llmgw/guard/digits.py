"""Check digits: what tells a card, an IBAN or a national id from any run of digits.

A pattern alone finds every sixteen-digit order number; the checksum each scheme
carries turns most of those away, so `pii` redacts what is personal data, not every
number in a prompt.
"""

from __future__ import annotations


def only_digits(text: str) -> str:
    return "".join(ch for ch in text if "0" <= ch <= "9")


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check of payment card numbers."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """ISO 13616: the country and check digits moved to the end, letters as 10..35,
    the whole number mod 97 is 1."""
    compact = "".join(text.split()).upper()
    if not 15 <= len(compact) <= 34 or not compact.isalnum():
        return False
    moved = compact[4:] + compact[:4]
    number = "".join(str(int(ch, 36)) for ch in moved)
    return int(number) % 97 == 1


def tckn_valid(digits: str) -> bool:
    """Turkey's identity number (T.C. Kimlik No): eleven digits, no leading zero, the
    tenth and eleventh check digits."""
    if len(digits) != 11 or digits[0] == "0":
        return False
    d = [ord(ch) - 48 for ch in digits]
    tenth = ((d[0] + d[2] + d[4] + d[6] + d[8]) * 7 - (d[1] + d[3] + d[5] + d[7])) % 10
    eleventh = sum(d[:10]) % 10
    return d[9] == tenth and d[10] == eleventh


def ssn_valid(text: str) -> bool:
    """A US Social Security number as issued: no area 000, 666 or 900-999, no group 00,
    no serial 0000 (the number carries no check digit; these rules are all there is)."""
    digits = only_digits(text)
    if len(digits) != 9:
        return False
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"
