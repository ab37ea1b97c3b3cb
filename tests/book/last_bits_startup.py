"""IPython startup file for ``make test-portable``'s last-bits run (see ``tests/book/last_bits.py``).

The Makefile copies it into ``$IPYTHONDIR/profile_default/startup/`` of a temporary IPython folder,
so that every kernel nbval starts enters the mode before the chapter's first cell.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.environ["MHA_ROOT"], "tests", "book"))
import last_bits  # noqa: E402

last_bits.install()
