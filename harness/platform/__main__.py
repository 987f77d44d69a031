import sys

from harness.platform.daemon import main

sys.exit(main())
