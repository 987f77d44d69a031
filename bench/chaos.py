#!/usr/bin/env python3
"""Many SIGKILLs of `labctl deploy` at random moments, each followed by `labctl destroy`: the
long version of the e2e chaos test (harness/testing/chaos.py). Exits 1 if any trial left
something behind; prints the seed to replay it.

    sudo .venv/bin/python bench/chaos.py --trials 100 [--seed N] [--topology FILE]
        [--runtime netns|docker|mininet] [--share-memory auto|on|off]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.linux import ksm  # noqa: E402
from harness.runtime import RUNTIMES  # noqa: E402
from harness.testing import chaos  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=random.SystemRandom().randrange(10**6))
    parser.add_argument("--topology", type=Path, default=REPO / "topologies" / "sai-fabric.yml")
    parser.add_argument("--runtime", choices=RUNTIMES, default="netns")
    parser.add_argument("--share-memory", choices=ksm.CHOICES, default="auto")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/chaos.py needs root")
    done = chaos.run(chaos.Chaos(args.topology, "benchchaos", args.runtime, args.share_memory,
                                 args.seed), args.trials)
    print(done.summary())
    return 0 if done.clean else 1


if __name__ == "__main__":
    sys.exit(main())
