#!/usr/bin/env python3
"""Many SIGKILLs of `labctl deploy` at random moments, each followed by `labctl destroy`: the
long version of the e2e chaos test (harness/testing/chaos.py). Exits 1 if any trial left
something behind; prints the seed to replay it.

    sudo .venv/bin/python bench/chaos.py --trials 100 [--seed N] [--topology FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.runtime import RUNTIMES  # noqa: E402
from harness.testing import chaos  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=random.SystemRandom().randrange(10**6))
    parser.add_argument("--topology", type=Path, default=REPO / "topologies" / "sai-fabric.yml")
    parser.add_argument("--runtime", choices=RUNTIMES, default="netns")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/chaos.py needs root")
    span, trials = chaos.run(args.topology, "benchchaos", args.trials, args.seed, args.runtime)
    print(chaos.summary(args.topology, args.seed, span, trials, args.runtime))
    return 0 if all(t.clean for t in trials) else 1


if __name__ == "__main__":
    sys.exit(main())
