"""Workshop tools: the setup check (``doctor``) and student handouts.

Run from the repository folder:

* ``python -m perwatt doctor``: checks the environment a chapter needs and prints a fix for each
  problem; exits 1 if anything is wrong.
* ``python -m perwatt handouts --out handouts``: writes one student notebook per chapter from the
  built book (:mod:`perwatt.handouts`); ``--answers`` keeps the solutions, ``--force`` replaces
  notebooks that differ.
* ``python -m perwatt links --hub URL --repo URL [--branch B]``: prints an nbgitpuller link per handout that
  opens it in JupyterLab on a JupyterHub (:mod:`perwatt.hub`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from perwatt import devtools
from perwatt import doctor as setup_check
# The setup check lives in perwatt.doctor (standard library only until a check needs more);
# these names stay importable from here.
from perwatt.doctor import MIN_PYTHON, Check, doctor, report  # noqa: F401

REPO = devtools.REPO


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m perwatt", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    setup_check.add_arguments(commands.add_parser("doctor", help="check this environment for the workshop"))
    hand = commands.add_parser("handouts", help="write student notebooks (run `make book` first)")
    hand.add_argument("--out", type=Path, default=Path("handouts"), help="folder for the notebooks")
    hand.add_argument("--force", action="store_true", help="replace notebooks that differ (students' edits are lost)")
    hand.add_argument("--answers", action="store_true", help="keep the worked solutions: the host's answer key")
    from perwatt import hub

    hub.add_arguments(commands.add_parser("links", help="print a one-click hub link per handout (nbgitpuller)"))
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return setup_check.run(args)
    from perwatt import handouts

    if args.command == "links":
        return hub.run(args, list(handouts.filenames().values()))
    try:
        written = handouts.write(args.out, force=args.force, answers=args.answers)
    except handouts.HandoutError as err:
        print(f"handouts: {err}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0
