"""A law written by its user as text, ``loss ~ E + A / params^alpha + B / tokens^beta``, read
by an allow-list over Python's own parser (:mod:`ast`), never by ``eval``: numbers, names,
``+ - * /``, ``^`` or ``**``, parentheses, and the calls ``exp``, ``log``, ``sqrt``, ``min`` and
``max``. Anything else (an attribute, a subscript, a lambda, another call, a name with an
underscore at either end, a string) is refused in one line that names it. The parsed
expression is a tree of plain Python tuples that :func:`evaluate` walks with numpy."""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from archfit.errors import FitInputError
from archfit.numbers import shown

# a formula is a line or two: past these it is refused before anything is parsed or evaluated
MAX_CHARS = 2000
MAX_NODES = 400
MAX_DEPTH = 40
CALLS = {"exp": 1, "log": 1, "sqrt": 1, "min": None, "max": None}  # name -> arguments (None: 2+)
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_BINARY: dict[type, str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
                            ast.Pow: "**"}


@dataclass(frozen=True)
class Expression:
    """A parsed formula: the response column, the right-hand side as a tree of tuples
    (``("num", v)``, ``("name", n)``, ``("neg", e)``, ``(op, a, b)``, ``("call", f, args)``),
    its names in order of first appearance, and the text as written (``^`` kept)."""

    response: str
    tree: tuple[Any, ...]
    names: tuple[str, ...]
    text: str

    def parameters(self, columns: set[str]) -> tuple[str, ...]:
        """The names that are not columns of the table: the parameters to fit."""
        return tuple(n for n in self.names if n not in columns)

    def variables(self, columns: set[str]) -> tuple[str, ...]:
        return tuple(n for n in self.names if n in columns)


def parse(text: Any) -> Expression:
    """``text`` (``response ~ expression``) parsed under the allow-list; one
    :class:`~archfit.errors.FitInputError` line naming what is refused."""
    if not isinstance(text, str) or not text.strip():
        raise FitInputError("--formula needs text such as \"loss ~ E + A / params^alpha\"")
    if len(text) > MAX_CHARS:
        raise FitInputError(f"--formula is {len(text):,} characters; a law is at most "
                            f"{MAX_CHARS:,} (write fewer terms)")
    if text.count("~") != 1:
        raise FitInputError("--formula must read 'loss ~ expression': one '~' between the "
                            "response column and the law")
    lhs, rhs = (part.strip() for part in text.split("~"))
    if not NAME.match(lhs) or lhs.endswith("_"):
        raise FitInputError(f"--formula's response {lhs!r} must be a column name, e.g. loss")
    if "__" in rhs:
        raise FitInputError("--formula refuses '__' (names with underscores at the ends)")
    try:
        node = ast.parse(rhs.replace("^", "**"), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        why = getattr(e, "msg", None) or type(e).__name__
        raise FitInputError(f"--formula is not an expression archfit reads ({why}); use "
                            "numbers, names, + - * / ^ ( ) and exp, log, sqrt, min, max"
                            ) from None
    count = sum(1 for _ in ast.walk(node))
    if count > MAX_NODES:
        raise FitInputError(f"--formula has {count:,} parts; a law is at most {MAX_NODES}")
    names: list[str] = []
    tree = _build(node.body, rhs, names, 0)
    return Expression(lhs, tree, tuple(names), " ".join(text.split()))


def _refuse(node: ast.AST, source: str, what: str) -> FitInputError:
    seg = ast.get_source_segment(source.replace("^", "**"), node) or type(node).__name__
    return FitInputError(f"--formula refuses {what} {seg[:40]!r}: it takes numbers, column and "
                         "parameter names, + - * / ^ ( ) and exp, log, sqrt, min, max")


def _build(node: ast.AST, source: str, names: list[str], depth: int) -> tuple[Any, ...]:
    if depth > MAX_DEPTH:
        raise FitInputError(f"--formula is nested over {MAX_DEPTH} deep; write it flatter")
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _refuse(node, source, "the constant")
        try:
            x = float(v)
        except OverflowError:
            x = math.inf
        if not math.isfinite(x):
            raise FitInputError(f"--formula's number {shown(v)} is beyond what a float holds "
                                "(about 1.8e308); write a finite number or a parameter")
        return ("num", x)
    if isinstance(node, ast.Name):
        if not NAME.match(node.id) or node.id.endswith("_"):
            raise _refuse(node, source, "the name")
        if node.id in CALLS:
            raise _refuse(node, source, "the function name used as a value")
        if node.id not in names:
            names.append(node.id)
        return ("name", node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _build(node.operand, source, names, depth + 1)
        return ("neg", inner) if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return (_BINARY[type(node.op)], _build(node.left, source, names, depth + 1),
                _build(node.right, source, names, depth + 1))
    if isinstance(node, ast.Call):
        f = node.func
        if not isinstance(f, ast.Name) or f.id not in CALLS or node.keywords:
            raise _refuse(node, source, "the call")
        want = CALLS[f.id]
        if (want is not None and len(node.args) != want) or (want is None and
                                                              len(node.args) < 2):
            raise FitInputError(f"--formula: {f.id} takes "
                                f"{want if want else 'two or more'} argument(s), got "
                                f"{len(node.args)}")
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise _refuse(node, source, "the starred argument in")
        return ("call", f.id, tuple(_build(a, source, names, depth + 1) for a in node.args))
    kinds = {ast.Attribute: "the attribute", ast.Subscript: "the subscript",
             ast.Lambda: "the lambda", ast.Compare: "the comparison", ast.BoolOp: "the logic",
             ast.IfExp: "the conditional"}
    raise _refuse(node, source, kinds.get(type(node), "the part"))


def evaluate(tree: tuple[Any, ...], env: Mapping[str, Any]) -> Any:
    """The expression at ``env`` (names to numbers or numpy arrays), with numpy's functions;
    arithmetic errors come back as inf or nan, as numpy's do."""
    import numpy as np

    ops: dict[str, Callable[[Any, Any], Any]] = {
        "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "**": np.power}
    fns: dict[str, Callable[..., Any]] = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt}

    def walk(t: tuple[Any, ...]) -> Any:
        kind = t[0]
        if kind == "num":
            return t[1]
        if kind == "name":
            return env[t[1]]
        if kind == "neg":
            return np.negative(walk(t[1]))
        if kind == "call":
            args = [walk(a) for a in t[2]]
            if t[1] in fns:
                return fns[t[1]](args[0])
            fold = np.minimum if t[1] == "min" else np.maximum
            out = args[0]
            for a in args[1:]:
                out = fold(out, a)
            return out
        return ops[kind](walk(t[1]), walk(t[2]))

    with np.errstate(all="ignore"):
        return walk(tree)


def evaluate_with_gradient(tree: tuple[Any, ...], env: Mapping[str, Any],
                           wrt: Sequence[str]) -> tuple[Any, dict[int, Any]]:
    """The expression at ``env`` and its derivatives in the names ``wrt`` (forward mode: each
    node carries its value and its partials, ``{index in wrt: derivative}`` for the names it
    depends on, a number or an array over the rows; the usual rules of sums, products,
    quotients, powers, exp, log, sqrt, and min/max by the argument that wins). Exact where
    numeric differences are not, and one walk of the tree instead of one per name. Returns
    ``(value, partials)``; a name absent from ``partials`` does not move the value;
    arithmetic errors come back as inf or nan."""
    import numpy as np

    index = {n: i for i, n in enumerate(wrt)}

    def add(a: dict[int, Any], b: dict[int, Any]) -> dict[int, Any]:
        if not a or not b:
            return a or b
        out = dict(a)
        for i, v in b.items():
            out[i] = out[i] + v if i in out else v
        return out

    def scale(g: dict[int, Any], f: Any) -> dict[int, Any]:
        return {i: v * f for i, v in g.items()}

    def walk(t: tuple[Any, ...]) -> tuple[Any, dict[int, Any]]:
        kind = t[0]
        if kind == "num":
            return t[1], {}
        if kind == "name":
            return env[t[1]], ({index[t[1]]: 1.0} if t[1] in index else {})
        if kind == "neg":
            v, g = walk(t[1])
            return np.negative(v), scale(g, -1.0)
        if kind == "call":
            args = [walk(a) for a in t[2]]
            v, g = args[0]
            if t[1] == "exp":
                e = np.exp(v)
                return e, scale(g, e)
            if t[1] == "log":
                return np.log(v), scale(g, 1.0 / np.asarray(v, float))
            if t[1] == "sqrt":
                r = np.sqrt(v)
                return r, scale(g, 0.5 / r)
            for w, h in args[1:]:  # min and max: the partials of the argument that wins
                first = (v <= w) if t[1] == "min" else (v >= w)
                v = np.where(first, v, w)
                g = {i: np.where(first, g.get(i, 0.0), h.get(i, 0.0)) for i in {*g, *h}}
            return v, g
        (a, ga), (b, gb) = walk(t[1]), walk(t[2])
        if kind == "+":
            return a + b, add(ga, gb)
        if kind == "-":
            return a - b, add(ga, scale(gb, -1.0))
        if kind == "*":
            return a * b, add(scale(ga, b), scale(gb, a))
        if kind == "/":
            q = a / b
            return q, add(scale(ga, 1.0 / b), scale(gb, -q / b))
        p = np.power(a, b)  # a^b: b a^(b-1) a' + a^b ln(a) b'
        return p, add(scale(ga, b * np.power(a, b - 1.0)) if ga else {},
                      scale(gb, p * np.log(a)) if gb else {})

    with np.errstate(all="ignore"):
        return walk(tree)


def linear_parameters(tree: tuple[Any, ...], parameters: tuple[str, ...]) -> tuple[str, ...]:
    """The parameters the expression is linear in, each a coefficient of its own top-level
    term (``E``, ``A / params^alpha``, ``B * exp(-tokens)``): solved exactly for given values
    of the others when starts are made (variable projection)."""
    def uses(t: tuple[Any, ...]) -> set[str]:
        if t[0] == "name":
            return {t[1]}
        if t[0] == "num":
            return set()
        if t[0] == "call":
            return set().union(*(uses(a) for a in t[2]))
        return set().union(*(uses(a) for a in t[1:]))

    def terms(t: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if t[0] == "+":
            return terms(t[1]) + terms(t[2])
        return [t]

    out = []
    for term in terms(tree):
        coef = None
        if term[0] == "name":
            coef = term[1]
        elif term[0] in ("*", "/") and term[1][0] == "name":
            coef = term[1][1]
        elif term[0] == "*" and term[2][0] == "name":
            coef = term[2][1]
        if coef in parameters and coef not in out:
            rest = [t for t in terms(tree) if t is not term]
            other = term[2] if term[0] in ("*", "/") and term[1] == ("name", coef) else \
                term[1] if term[0] == "*" else None
            if coef not in set().union(*(uses(t) for t in rest), uses(other) if other else set()):
                out.append(coef)
    return tuple(out)


def formula_names(texts: Any) -> list[str]:
    """Every name the formulas ``texts`` use (their columns among them are their variables),
    in order, once; a formula that does not parse is left to the fit to refuse."""
    out: list[str] = []
    for t in texts or ():
        try:
            names = parse(t).names
        except FitInputError:
            continue
        out += [n for n in names if n not in out]
    return out
