"""`python -m harness.cli` is labctl (used by tests to run the CLI from the source tree)."""

import sys

from harness.cli import main

sys.exit(main())
