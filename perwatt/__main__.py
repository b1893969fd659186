"""``python -m perwatt doctor`` and ``python -m perwatt handouts``: see :mod:`perwatt.workshop`."""

import sys

from perwatt.workshop import main

sys.exit(main())
