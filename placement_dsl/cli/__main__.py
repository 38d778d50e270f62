"""``python -m placement_dsl.cli``: the ``placement-dsl`` command."""
import sys

from . import main

sys.exit(main())
