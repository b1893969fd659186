"""Write perwatt/vendor/: the Vega, Vega-Lite and vega-embed bundle every page with a chart loads.

vl-convert makes it at the Vega-Lite version the installed Altair targets, and perwatt/vegabundle.py
wraps it as a classic script. A build uses the repository's copy
when the installed vl-convert and Altair are the ones its record names, and makes its own
otherwise; tests/test_vendor.py checks that the copy is exactly what these versions make. Run this
after changing the vl-convert-python or altair pin:

    .venv/bin/python scripts/vendor_vega.py
"""

from __future__ import annotations

from perwatt import vegabundle

if __name__ == "__main__":
    path = vegabundle.vendor()
    print(f"wrote {path} ({path.stat().st_size:,} bytes) and {vegabundle.VENDOR_RECORD}")
