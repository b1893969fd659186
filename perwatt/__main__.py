"""``python -m perwatt doctor`` and ``python -m perwatt handouts``: see :mod:`perwatt.workshop`."""

import sys

if sys.argv[1:2] == ["doctor"]:
    # The setup check goes straight to perwatt.doctor, which checks the Python version before it imports
    # anything outside the standard library, so it reports (rather than crashes) on a bare or old install.
    from perwatt.doctor import main

    sys.exit(main(sys.argv[2:]))

from perwatt.workshop import main

sys.exit(main())
