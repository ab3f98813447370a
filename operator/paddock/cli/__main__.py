"""``python -m paddock.cli``: the ``paddock`` command."""

import sys

from paddock.cli.main import main

sys.exit(main())
