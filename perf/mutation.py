"""Mutation testing of the model and data modules: does the fast test suite catch a wrong formula?

A small AST-based runner (see the module's notes below for why not mutmut): each mutant makes one
change to a module, inside a private copy of the project, and runs that module's fast test files on
it in a subprocess. A mutant is *killed* if the tests fail (or time out).

In the model modules a mutant swaps one operator or nudges one constant in the formula code
(arithmetic + − × ÷ **, comparisons, unary minus, numbers). Validation code (raise statements and
their guards, ``checks`` calls, decorators, defaults, docstrings and messages) is not mutated there:
the fuzz test and the bad-input tests cover it.

In the data and benchmark-table modules (:data:`DATA_MODULES`) checking input *is* the formula, so
their guards are mutated too, and a mutant may also skip a statement (a call or an augmented
assignment becomes ``pass``: a rule never appended, a cache never cleared), swap ``and``/``or`` or
``in``/``not in``, drop a ``not``, or rename a string (``"maximum"`` → ``"XXmaximumXX"``, as mutmut
does: a schema key no longer read). Messages (raise statements and f-strings) are still not mutated.

    .venv/bin/python perf/mutation.py                    # a seeded sample per module (about 15 minutes)
    .venv/bin/python perf/mutation.py --group data       # the data modules only (about 5 minutes)
    .venv/bin/python perf/mutation.py --per-module 0     # every mutant (slow)

Prints the score per module and in all, and each surviving mutant, and writes perf/results/mutation.json
(mutation-model.json or mutation-data.json for one --group). Survivors judged
equivalent (no input the model accepts can tell them apart) are listed in EQUIVALENT with the reason.

Why not mutmut: mutmut 3 copies the project into ``mutants/`` and runs the whole suite through its
own trampolines for every mutant, which on this two-core, shared machine is far slower than running
one module's test files; mutmut 2 rewrites the source files in place, which would disturb anyone
else working in the same tree. This runner never touches the working tree.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Each model module and the fast test files that must catch a wrong formula in it.
TARGETS = {
    "metrics": ["tests/test_metrics.py", "tests/test_accounting.py"],
    "accounting": ["tests/test_accounting.py"],
    "specs": ["tests/test_roofline.py"],
    "roofline": ["tests/test_roofline.py"],
    "serving": ["tests/test_roofline.py"],
    "speculative": ["tests/test_speculative.py"],
    "agents": ["tests/test_agents.py"],
    "load": ["tests/test_agents.py"],
    "fleet": ["tests/test_fleet.py"],
    # The data and benchmark-table modules: loading and checking files, and the table's arithmetic.
    "data": ["tests/test_data.py", "tests/test_byon.py"],
    "csvfile": ["tests/test_data.py", "tests/test_byon.py"],
    "rules": ["tests/test_data.py", "tests/test_byon.py"],
    "plausible": ["tests/test_byon.py"],
    "catalog": ["tests/test_benchmark.py", "tests/test_byon.py", "tests/test_data.py", "tests/test_accounting.py",
                "tests/test_fleet.py"],
    "benchmark": ["tests/test_benchmark.py", "tests/test_byon.py", "tests/test_exercises.py"],
}
#: Modules whose validation is their behaviour: their guards are mutated, with the extra operators.
DATA_MODULES = ("data", "csvfile", "rules", "plausible", "catalog", "benchmark")
GROUPS = {"model": [m for m in TARGETS if m not in DATA_MODULES], "data": list(DATA_MODULES), "all": list(TARGETS)}
SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.Pow: ast.Mult,
         ast.FloorDiv: ast.Div, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
         ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}
#: The data modules' extra swaps: membership, identity, and the boolean operators.
EXTRA_SWAPS = {ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
               ast.And: ast.Or, ast.Or: ast.And, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd}
#: Survivors judged equivalent, by "module:line:description", with the reason.
EQUIVALENT: dict[str, str] = {
    "specs:83:0.0 → 1.0": "a dense model's per-expert parameters: with routed = active experts, total and step "
                          "weights are shared + k × per-expert = the active count whatever per-expert is",
}


def _skipped(node: ast.AST, parents: dict, guards: bool = False) -> bool:
    """Inside a message, a decorator, a default or a docstring, or (unless ``guards``) validation."""
    child = node
    while child in parents:
        parent = parents[child]
        if isinstance(parent, (ast.Raise, ast.JoinedStr)):
            return True
        if not guards and isinstance(parent, ast.If) and all(isinstance(s, ast.Raise) for s in parent.body) \
                and child is parent.test:
            return True
        if isinstance(parent, (ast.FunctionDef, ast.ClassDef)) and (
                child in parent.decorator_list or (isinstance(parent, ast.FunctionDef) and child is parent.args)):
            return True
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and \
                isinstance(parent.func.value, ast.Name) and parent.func.value.id == "checks":
            return True
        if isinstance(parent, ast.Module) and not isinstance(child, (ast.FunctionDef, ast.ClassDef)):
            return True  # module-level constants and imports
        child = parent
    return False


def _replace(tree: ast.AST, node: ast.AST, replacement: ast.AST) -> None:
    holder = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}[node]
    for field, value in ast.iter_fields(holder):
        if value is node:
            setattr(holder, field, replacement)
        elif isinstance(value, list) and node in value:
            value[value.index(node)] = replacement


def mutants(source: str, extended: bool = False) -> list[tuple[int, str, str]]:
    """Every (line, description, mutated source) of one module; ``extended``: with the data
    modules' guards and extra operators (see the module docstring)."""
    swaps = {**SWAPS, **EXTRA_SWAPS} if extended else SWAPS
    tree = ast.parse(source)
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    found = []
    for index, node in enumerate(ast.walk(tree)):
        if _skipped(node, parents, guards=extended):
            continue
        parent = parents.get(node)
        targets = []
        if isinstance(node, ast.BinOp) and type(node.op) in swaps:
            targets.append(("op", type(node.op).__name__, swaps[type(node.op)].__name__))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in swaps:
            targets.append(("cmp", type(node.ops[0]).__name__, swaps[type(node.ops[0])].__name__))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            targets.append(("neg", "-x", "x"))
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float) and \
                not isinstance(parent, ast.Subscript) and not isinstance(parent, ast.Expr):
            targets.append(("num", repr(node.value), repr(node.value + 1)))
        elif extended and isinstance(node, ast.BoolOp) and type(node.op) in swaps:
            targets.append(("bool", type(node.op).__name__, swaps[type(node.op)].__name__))
        elif extended and isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert)):
            targets.append(("neg", "not x" if isinstance(node.op, ast.Not) else "~x", "x"))
        elif extended and isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value \
                and not isinstance(parent, ast.Expr):
            targets.append(("str", repr(node.value), repr(f"XX{node.value}XX")))
        elif extended and isinstance(node, (ast.Expr, ast.AugAssign)) and not (
                isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            targets.append(("stmt", ast.unparse(node).split("\n")[0][:60], "pass"))
        for kind, before, after in targets:
            mutated = ast.parse(source)
            twin = list(ast.walk(mutated))[index]
            if kind in ("op", "bool"):
                twin.op = swaps[type(twin.op)]()
            elif kind == "cmp":
                twin.ops = [swaps[type(twin.ops[0])]()]
            elif kind == "num":
                twin.value = twin.value + 1
            elif kind == "str":
                twin.value = f"XX{twin.value}XX"
            elif kind == "stmt":
                _replace(mutated, twin, ast.Pass())
            else:
                _replace(mutated, twin, twin.operand)
            found.append((node.lineno, f"{before} → {after}", ast.unparse(mutated)))
    return found


def run_tests(workdir: Path, tests: list[str], timeout: float) -> bool:
    """True if the tests pass (the mutant survives)."""
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not slow", *tests]
    try:
        done = subprocess.run(cmd, cwd=workdir, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def _copy(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for name in ("perwatt", "tests", "data"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    for name in ("pyproject.toml", "_config.yml", "_toc.yml"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, dest / name)
    return dest


def _one(job: tuple) -> dict:
    module, line, description, source, tests, timeout = job
    with tempfile.TemporaryDirectory(prefix="perwatt-mutant-") as tmp:
        work = _copy(Path(tmp))
        (work / "perwatt" / f"{module}.py").write_text(source, encoding="utf-8")
        survived = run_tests(work, tests, timeout)
    return {"module": module, "line": line, "mutation": description, "survived": survived,
            "key": f"{module}:{line}:{description}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-module", type=int, default=20, help="mutants sampled per module (0: all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--group", choices=sorted(GROUPS), default="all",
                        help="the model modules, the data modules (DATA_MODULES), or all")
    parser.add_argument("--modules", nargs="*", help="these modules only (overrides --group)")
    args = parser.parse_args()
    args.modules = args.modules or GROUPS[args.group]
    unknown = sorted(set(args.modules) - set(TARGETS))
    if unknown:
        parser.error(f"no such target module(s) {unknown}; choose from {list(TARGETS)}")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="perwatt-baseline-") as tmp:
        work = _copy(Path(tmp))
        failing = [m for m in args.modules if not run_tests(work, TARGETS[m], args.timeout)]
    if failing:
        print(f"the unmutated tests fail for {failing}; fix them first")
        return 2
    rng = random.Random(args.seed)
    jobs = []
    for module in args.modules:
        found = mutants((ROOT / "perwatt" / f"{module}.py").read_text(encoding="utf-8"), module in DATA_MODULES)
        if args.per_module and len(found) > args.per_module:
            found = rng.sample(found, args.per_module)
        jobs += [(module, line, desc, src, TARGETS[module], args.timeout) for line, desc, src in sorted(found)]
    print(f"{len(jobs)} mutants over {len(args.modules)} modules, {args.workers} at a time")
    with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
        results = list(pool.map(_one, jobs))
    survivors = [r for r in results if r["survived"]]
    equivalent = [r for r in survivors if r["key"] in EQUIVALENT]
    real = len(results) - len(equivalent)
    killed = len(results) - len(survivors)
    score = killed / real if real else 1.0
    elapsed = time.perf_counter() - start
    modules = {}
    for module in args.modules:
        mine = [r for r in results if r["module"] == module]
        alive = [r for r in mine if r["survived"]]
        modules[module] = {"mutants": len(mine), "killed": len(mine) - len(alive),
                           "equivalent": sum(r["key"] in EQUIVALENT for r in alive),
                           "survivors": [r["key"] for r in alive if r["key"] not in EQUIVALENT]}
        print(f"  {module:<12} {len(mine):3d} mutants, {len(mine) - len(alive):3d} killed, "
              f"{modules[module]['equivalent']} equivalent, {len(modules[module]['survivors'])} surviving")
    print(f"killed {killed} of {real} non-equivalent mutants: {score:.0%} (target ≥ 85 %); "
          f"{len(equivalent)} equivalent; {elapsed / 60:.1f} min")
    for r in survivors:
        note = EQUIVALENT.get(r["key"])
        print(f"  survived {r['key']}" + (f"  [equivalent: {note}]" if note else ""))
    out = ROOT / "perf" / "results"
    out.mkdir(parents=True, exist_ok=True)
    # A run of one group keeps its own file, so that it does not overwrite the other's results.
    name = "mutation.json" if args.modules == GROUPS["all"] else (
        f"mutation-{args.group}.json" if args.modules == GROUPS[args.group] else "mutation-some.json")
    (out / name).write_text(json.dumps(
        {"score": score, "killed": killed, "non_equivalent": real, "equivalent": len(equivalent),
         "seconds": elapsed, "per_module": args.per_module, "seed": args.seed, "modules": modules,
         "results": results}, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0 if score >= 0.85 else 1


if __name__ == "__main__":
    sys.exit(main())
