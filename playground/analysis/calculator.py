"""The tool-calling agent's calculator: arithmetic parsed by its own grammar, never Python's `eval`.

A model's tool call is untrusted text, so the calculator reads only this grammar (a recursive-descent parser, one
function per rule) and computes the value as it parses:

    expression := term (("+" | "-") term)*
    term       := unary (("*" | "/") unary)*
    unary      := ("-" | "+") unary | power           a sign applies after the power: -3^2 = -(3^2) = -9
    power      := primary (("^" | "**") unary)?      right-associative: 2^3^2 = 2^9; 2^-1 = 0.5
    primary    := number | "(" expression ")" | ("sqrt" | "abs") "(" expression ")"
    number     := digits ["." digits]  (commas between digit groups allowed: 1,234)

The sign's place is mathematics' and Python's (where -3**2 is -9), not a spreadsheet's (Excel's -3^2 is 9): a model
writes the expressions, and it learned them from code and textbooks. The tool's description says so (TOOLS in
analysis/tool_calling.py). Whole numbers stay Python ints through + - * ^ and a division that comes out whole, so a
whole result is exact up to MAX_MAGNITUDE (999999999999 + 2 is 1000000000001); the rest are floats.

Anything else is a CalculatorError that says what was found where. Limits keep one call cheap: at most
MAX_CHARS characters, MAX_DEPTH nested parentheses, and no value beyond MAX_MAGNITUDE (2^10000 is refused, not
computed); division by zero and the square root of a negative number are errors, not infinities or NaNs.
"""

from __future__ import annotations

import math
import re

MAX_CHARS = 200          # a longer expression is refused before it is read
MAX_DEPTH = 30           # nested parentheses
MAX_MAGNITUDE = 1e15     # results beyond this are refused (and so are powers that would reach it)
FUNCTIONS = {"sqrt": math.sqrt, "abs": abs}
_TOKEN = re.compile(r"\s*(?:(\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)|(\*\*|[-+*/^()])|([a-z]+))", re.IGNORECASE)


class CalculatorError(ValueError):
    """An expression the calculator refuses: the message says why, in words a student can act on."""


def _tokens(expression: str) -> list[tuple[str, str, int]]:
    """(kind, text, position) for each token: kind is "num", "op" or "name"; an unknown character is an error."""
    out, pos = [], 0
    while pos < len(expression):
        if expression[pos:].strip() == "":
            break
        match = _TOKEN.match(expression, pos)
        if not match:
            at = len(expression) - len(expression[pos:].lstrip())   # the first character after the spaces
            raise CalculatorError(f"unexpected character {expression[at]!r} at position {at + 1}")
        number, op, name = match.groups()
        start = match.start(1 if number else 2 if op else 3)
        out.append(("num", number, start) if number else ("op", op, start) if op else ("name", name.lower(), start))
        pos = match.end()
    return out


class _Parser:
    def __init__(self, expression: str):
        self.tokens = _tokens(expression)
        self.i = 0
        self.depth = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, text: str) -> bool:
        token = self.peek()
        if token and token[0] == "op" and token[1] == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.take(text):
            token = self.peek()
            where = f"found {token[1]!r} at position {token[2] + 1}" if token else "the expression ended"
            raise CalculatorError(f"expected {text!r} but {where}")

    def expression(self) -> float:
        value = self.term()
        while True:
            if self.take("+"):
                value = _checked(value + self.term())
            elif self.take("-"):
                value = _checked(value - self.term())
            else:
                return value

    def term(self) -> float:
        value = self.unary()
        while True:
            if self.take("*"):
                value = _checked(value * self.unary())
            elif self.take("/"):
                divisor = self.unary()
                if divisor == 0:
                    raise CalculatorError("division by zero")
                whole = isinstance(value, int) and isinstance(divisor, int) and value % divisor == 0
                value = _checked(value // divisor if whole else value / divisor)   # 10/2 stays the int 5
            else:
                return value

    def unary(self) -> float:
        if self.take("-"):
            return -self.unary()
        if self.take("+"):
            return self.unary()
        return self.power()

    def power(self) -> float:
        base = self.primary()
        if self.take("^") or self.take("**"):
            exponent = self.unary()
            if base == 0 and exponent < 0:
                raise CalculatorError("division by zero (0 to a negative power)")
            if base < 0 and not float(exponent).is_integer():
                raise CalculatorError("a negative number to a fractional power is not a real number")
            if abs(base) > 1 and exponent * math.log10(abs(base)) > math.log10(MAX_MAGNITUDE):
                raise CalculatorError(f"the result is too large (beyond {MAX_MAGNITUDE:.0e})")
            return _checked(base ** exponent)   # an int to a non-negative int power stays an exact int
        return base

    def primary(self) -> float:
        token = self.peek()
        if token is None:
            raise CalculatorError("the expression ended where a number was expected")
        kind, text, pos = token
        if kind == "num":
            self.i += 1
            text = text.replace(",", "")
            return _checked(float(text) if "." in text else int(text))
        if kind == "name":
            if text not in FUNCTIONS:
                raise CalculatorError(f"unknown function {text!r} at position {pos + 1}; known: "
                                      f"{', '.join(FUNCTIONS)}")
            self.i += 1
            argument = self.parenthesised()
            if text == "sqrt" and argument < 0:
                raise CalculatorError("the square root of a negative number is not a real number")
            return FUNCTIONS[text](argument)
        if text == "(":
            return self.parenthesised()
        raise CalculatorError(f"unexpected {text!r} at position {pos + 1}")

    def parenthesised(self) -> float:
        self.expect("(")
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise CalculatorError(f"more than {MAX_DEPTH} nested parentheses")
        value = self.expression()
        self.expect(")")
        self.depth -= 1
        return value


def _checked(value: float) -> float:
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise CalculatorError(f"the result is too large (beyond {MAX_MAGNITUDE:.0e})")
    return value


def evaluate(expression) -> int | float:
    """The value of `expression` under the grammar above: an int when it is a whole number (exact: the module's
    docstring), else a float rounded to 12 significant digits (so 0.1 + 0.2 is 0.3). Any refusal is a
    CalculatorError."""
    if not isinstance(expression, str):
        raise CalculatorError(f"the expression must be text, not {type(expression).__name__}")
    if len(expression) > MAX_CHARS:
        raise CalculatorError(f"the expression is {len(expression):,} characters long; the calculator reads at most "
                              f"{MAX_CHARS}")
    if not expression.strip():
        raise CalculatorError("the expression is empty")
    parser = _Parser(expression)
    value = parser.expression()
    if parser.peek() is not None:
        _, text, pos = parser.peek()
        raise CalculatorError(f"unexpected {text!r} at position {pos + 1}")
    if isinstance(value, int):
        return value
    value = value if value.is_integer() else float(f"{value:.12g}")   # 0.30000000000000004 -> 0.3
    return int(value) if value.is_integer() else value
