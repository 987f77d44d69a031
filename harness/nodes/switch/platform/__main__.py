import sys

from harness.nodes.switch.platform.daemon import main

sys.exit(main())
