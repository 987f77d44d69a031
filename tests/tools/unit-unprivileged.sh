#!/usr/bin/env bash
# The unit tests need no root: run them as `nobody`, from a copy of the tree in a directory
# nobody may read, with a venv of Debian's python3 (the project's .venv may sit under /root).
# A unit test that creates a namespace, or reads anything only root may, fails here.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /var/tmp/fabric-lab-unprivileged.XXXXXX)
trap 'rm -rf "$work"' EXIT
export TMPDIR="$work/tmp" && mkdir "$TMPDIR"  # pip's build dirs stay out of the host's /tmp
git -C "$repo" ls-files -z | (cd "$repo" && xargs -0 cp --parents -t "$work")
/usr/bin/python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check -e "$work[test,ops]"
chown -R nobody:nogroup "$work"
chmod 755 "$work"
cd "$work"
setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME="$work" \
  "$work/venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit
