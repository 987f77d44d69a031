import sys

from harness.nodes.switch.agent.main import main

sys.exit(main())
