"""Arithmetic written once and run in two places: NumPy in Python, Vega expressions in the page.

A figure whose inputs are too many to precompute on a grid (a chip of the reader's own: four
sliders of many steps each) ships per-row quantities instead and combines them in the browser. The
combination must be the model's own, not a second copy typed in JavaScript. So the combination is
built from :class:`Expr` objects: Python evaluates them over arrays (:meth:`Expr.evaluate`), and
the chart receives the same tree printed as a Vega expression (:meth:`Expr.vega`). Tests compare
the two worlds at sampled settings.

A :class:`Formula` is a sequence of named steps; a step may use any earlier step's result by name,
as a column of the row (``field``). In the page each step becomes one ``calculate`` transform.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Union

import numpy as np

Operand = Union["Expr", float, int]

#: Significant digits of constants printed into an expression: a double's round trip.
_DIGITS = 17


def _as_expr(value: Operand) -> "Expr":
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("an expression operand must be a number or an Expr, not a boolean")
    if isinstance(value, (int, float, np.integer, np.floating)) and np.isfinite(value):
        return Constant(float(value))
    raise TypeError(f"an expression operand must be a finite number or an Expr, got {value!r}")


class Expr:
    """A node of an arithmetic tree over row fields and chart parameters."""

    def evaluate(self, env: Mapping[str, object]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def vega(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def names(self) -> set[tuple[str, str]]:
        """The fields and parameters the tree reads, as ``(kind, name)`` pairs."""
        return set()

    def _binary(self, other: Operand, op: str, reverse: bool = False) -> "Expr":
        left, right = (_as_expr(other), self) if reverse else (self, _as_expr(other))
        return Binary(op, left, right)

    def __add__(self, other: Operand) -> "Expr":
        return self._binary(other, "+")

    def __radd__(self, other: Operand) -> "Expr":
        return self._binary(other, "+", True)

    def __sub__(self, other: Operand) -> "Expr":
        return self._binary(other, "-")

    def __rsub__(self, other: Operand) -> "Expr":
        return self._binary(other, "-", True)

    def __mul__(self, other: Operand) -> "Expr":
        return self._binary(other, "*")

    def __rmul__(self, other: Operand) -> "Expr":
        return self._binary(other, "*", True)

    def __truediv__(self, other: Operand) -> "Expr":
        return self._binary(other, "/")

    def __rtruediv__(self, other: Operand) -> "Expr":
        return self._binary(other, "/", True)

    def __le__(self, other: Operand) -> "Expr":
        return self._binary(other, "<=")

    def __lt__(self, other: Operand) -> "Expr":
        return self._binary(other, "<")

    def __ge__(self, other: Operand) -> "Expr":
        return self._binary(other, ">=")

    def __gt__(self, other: Operand) -> "Expr":
        return self._binary(other, ">")

    def equals(self, other: Operand) -> "Expr":
        """Equality as an expression (``==`` stays Python's, so Exprs can be compared and hashed)."""
        return self._binary(other, "==")

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Constant(Expr):
    value: float

    def evaluate(self, env: Mapping[str, object]) -> np.ndarray:
        return np.asarray(self.value)

    def vega(self) -> str:
        text = repr(self.value) if self.value == int(self.value) and abs(self.value) < 1e15 else f"{self.value:.{_DIGITS}g}"
        return f"({text})" if self.value < 0 else text


@dataclass(frozen=True, eq=False)
class Field(Expr):
    """A column of the row (``datum`` in the page)."""

    name: str

    def evaluate(self, env: Mapping[str, object]) -> np.ndarray:
        if self.name not in env:
            raise KeyError(f"expression needs field {self.name!r}, which the rows lack")
        return np.asarray(env[self.name])

    def vega(self) -> str:
        return f"datum[{self.name!r}]"

    def names(self) -> set[tuple[str, str]]:
        return {("field", self.name)}


@dataclass(frozen=True, eq=False)
class Param(Expr):
    """A chart parameter (a control's value in the page, a keyword in Python)."""

    name: str

    def evaluate(self, env: Mapping[str, object]) -> np.ndarray:
        if self.name not in env:
            raise KeyError(f"expression needs parameter {self.name!r}, which was not given")
        return np.asarray(env[self.name])

    def vega(self) -> str:
        return self.name

    def names(self) -> set[tuple[str, str]]:
        return {("param", self.name)}


_NUMPY = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "<=": np.less_equal,
          "<": np.less, ">=": np.greater_equal, ">": np.greater, "==": np.equal}


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr

    def evaluate(self, env: Mapping[str, object]) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return _NUMPY[self.op](self.left.evaluate(env), self.right.evaluate(env))

    def vega(self) -> str:
        return f"({self.left.vega()} {self.op} {self.right.vega()})"

    def names(self) -> set[tuple[str, str]]:
        return self.left.names() | self.right.names()


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """``max``, ``min`` (two or more operands) or ``where`` (a condition and two branches)."""

    function: str
    operands: tuple[Expr, ...]

    def evaluate(self, env: Mapping[str, object]) -> np.ndarray:
        values = [o.evaluate(env) for o in self.operands]
        if self.function == "where":
            return np.where(values[0].astype(bool), values[1], values[2])
        combine = np.maximum if self.function == "max" else np.minimum
        out = values[0]
        for v in values[1:]:
            out = combine(out, v)
        return out

    def vega(self) -> str:
        inner = [o.vega() for o in self.operands]
        if self.function == "where":
            return f"({inner[0]} ? {inner[1]} : {inner[2]})"
        return f"{self.function}({', '.join(inner)})"

    def names(self) -> set[tuple[str, str]]:
        return set().union(*(o.names() for o in self.operands))


def field(name: str) -> Field:
    return Field(name)


def param(name: str) -> Param:
    return Param(name)


def maximum(*operands: Operand) -> Expr:
    if len(operands) < 2:
        raise ValueError("maximum needs at least two operands")
    return Call("max", tuple(_as_expr(o) for o in operands))


def minimum(*operands: Operand) -> Expr:
    if len(operands) < 2:
        raise ValueError("minimum needs at least two operands")
    return Call("min", tuple(_as_expr(o) for o in operands))


def where(condition: Expr, then: Operand, otherwise: Operand) -> Expr:
    return Call("where", (_as_expr(condition), _as_expr(then), _as_expr(otherwise)))


def total(operands: Sequence[Operand]) -> Expr:
    """The sum of one or more operands."""
    if not operands:
        raise ValueError("total needs at least one operand")
    out = _as_expr(operands[0])
    for o in operands[1:]:
        out = out + o
    return out


def _compile(steps: tuple[tuple[str, Expr], ...]) -> Callable[[dict], dict[str, np.ndarray]]:
    """See :meth:`Formula._program`. Fields and parameters are read by their own nodes (the same
    lookups and errors); an Expr of a kind this does not know is evaluated by its own method."""
    lines: list[str] = []
    names: dict[str, object] = {"np": np, "where": np.where, "maximum": np.maximum, "minimum": np.minimum,
                                **{f"op{i}": f for i, f in enumerate(_NUMPY.values())}}
    ops = {op: f"op{i}" for i, op in enumerate(_NUMPY)}
    counter = itertools.count()

    def emit(expr: Expr, operand: bool = True) -> str:
        value = f"v{next(counter)}"
        if isinstance(expr, Binary):
            left, right = emit(expr.left), emit(expr.right)
            lines.append(f"{value} = {ops[expr.op]}({left}, {right})")
        elif isinstance(expr, Call):
            operands = [emit(o) for o in expr.operands]
            if expr.function == "where":
                lines.append(f"{value} = where({operands[0]}.astype(bool), {operands[1]}, {operands[2]})")
            else:
                combine = "maximum" if expr.function == "max" else "minimum"
                lines.append(f"{value} = {operands[0]}")
                lines.extend(f"{value} = {combine}({value}, {o})" for o in operands[1:])
        elif isinstance(expr, Constant) and operand:  # read, never returned: one 0-d array, made once
            names[value] = np.asarray(expr.value)
        else:  # a field, a parameter, a step that is a constant, or another kind: its own evaluate
            names[f"node{value}"] = expr
            lines.append(f"{value} = node{value}.evaluate(env)")
        return value

    for name, expr in steps:
        result = emit(expr, operand=False)
        lines.append(f"env[{name!r}] = out[{name!r}] = np.asarray({result}, dtype=float)")
    source = "\n".join(["def program(env):", "    out = {}",
                          "    with np.errstate(divide='ignore', invalid='ignore', over='ignore'):",
                          *(f"        {line}" for line in lines), "    return out"])
    exec(compile(source, "<perwatt.expression formula>", "exec"), names)
    return names["program"]


@dataclass(frozen=True)
class Formula:
    """Named steps, each an :class:`Expr` over the row's fields, the parameters and earlier steps."""

    steps: tuple[tuple[str, Expr], ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for name, expr in self.steps:
            if name in seen:
                raise ValueError(f"formula step {name!r} is defined twice")
            seen.add(name)

    def __reduce__(self):
        # Pickled as its steps alone: the compiled program (:meth:`_program`) is rebuilt on use.
        return (Formula, (self.steps,))

    @cached_property
    def inputs(self) -> set[tuple[str, str]]:
        """What the rows and parameters must supply: every name read that no step defines."""
        defined = {name for name, _ in self.steps}
        needed = set().union(*(e.names() for _, e in self.steps))
        return {(kind, name) for kind, name in needed if not (kind == "field" and name in defined)}

    def evaluate(self, rows: Mapping[str, object], params: Mapping[str, object]) -> dict[str, np.ndarray]:
        """Every step's values, computed over ``rows`` (columns as arrays) with ``params``."""
        # A field may come as a constant in ``params`` (one chip's bandwidth for every row, say).
        missing = sorted(n for k, n in self.inputs if n not in params and (k == "param" or n not in rows))
        if missing:
            raise ValueError(f"formula inputs missing: {missing}")
        env: dict[str, object] = {**params, **{k: np.asarray(v) for k, v in rows.items()}}
        return self._program(env)

    @cached_property
    def _program(self) -> Callable[[dict], dict[str, np.ndarray]]:
        """The steps as one Python function of the environment, running exactly the NumPy calls
        :meth:`Expr.evaluate` runs, in the same order, on the same operands (so the same numbers):
        a formula is evaluated thousands of times a build (a bisection over a chip's bandwidth, a
        frontier per chip and case), and walking the tree node by node, each binary operation in its
        own ``np.errstate``, cost several times the arithmetic."""
        return _compile(self.steps)

    def vega(self, keep: Sequence[str] | None = None, suffix: str = "",
             given: Mapping[str, Operand] | None = None) -> list[dict[str, str]]:
        """The steps as Vega-Lite ``calculate`` transforms, in order. With ``keep``, only those
        steps become transforms and every other step is written into the steps that use it: the
        page then runs a few long expressions per row rather than many short ones, which costs
        it far less (each transform is a pass over every row).

        ``suffix`` is appended to every step's column (and to every use of it), and ``given``
        replaces input fields by expressions or numbers: the page can then run the formula several
        times over one row, a case per run (one efficiency each, say), rather than copying the row
        once per case."""
        names = [name for name, _ in self.steps]
        unknown = set(keep or ()) - set(names)
        if unknown:
            raise ValueError(f"keep names steps the formula lacks: {sorted(unknown)}")
        inputs = {name for kind, name in self.inputs if kind == "field"}
        if set(given or ()) - inputs:
            raise ValueError(f"given names no input field of the formula: {sorted(set(given or ()) - inputs)}")
        written: dict[str, Expr] = {name: _as_expr(value) for name, value in (given or {}).items()}
        out = []
        for name, expr in self.steps:
            expanded = substitute(expr, written)
            if keep is None or name in keep:
                out.append({"calculate": expanded.vega(), "as": name + suffix})
                written[name] = Field(name + suffix)
            else:
                written[name] = expanded
        return out


def substitute(expr: Expr, steps: Mapping[str, Expr]) -> Expr:
    """``expr`` with each field named in ``steps`` replaced by that step's expression."""
    if isinstance(expr, Field):
        return steps.get(expr.name, expr)
    if isinstance(expr, Binary):
        return Binary(expr.op, substitute(expr.left, steps), substitute(expr.right, steps))
    if isinstance(expr, Call):
        return Call(expr.function, tuple(substitute(o, steps) for o in expr.operands))
    return expr
