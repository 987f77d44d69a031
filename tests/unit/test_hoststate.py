"""The host check of every e2e module (tests/e2e/conftest.py) on a busy host: another
program's /tmp files come and go without failing a module; a lab's own, or Mininet's cleanup
deleting a log, still does."""

from __future__ import annotations

from harness.testing.hoststate import differences

BEFORE = {"sysctls": {"net.ipv4.ip_forward": "0"},
          "tmp": {"build.log": "-rw-r--r-- 10 1", "systemd-private-x": "dir",
                  "their-socket": "srwxr-xr-x 0 1"}}


def tmp_after(changes: dict[str, str | None]) -> dict[str, object]:
    entries = dict(BEFORE["tmp"])  # type: ignore[arg-type]
    for name, value in changes.items():
        if value is None:
            del entries[name]
        else:
            entries[name] = value
    return {**BEFORE, "tmp": entries}


def test_another_programs_tmp_entries_are_not_the_labs() -> None:
    after = tmp_after({"tmpk3x9dsai": "dir", "pip-unpack-1": "dir", "their-socket": None,
                       ".org.chromium.Chromium.x": "dir"})
    after["tmp"]["build.log"] = "-rw-r--r-- 99 2"  # type: ignore[index]  # its owner appends
    assert differences(BEFORE, after) == []


def test_a_labs_own_tmp_entries_and_mininets_cleanup_are() -> None:
    after = tmp_after({"fl-bfd.sock": "srwxr-xr-x 0 1", "frr_leaf1": "dir",
                       "mininet.run": "-rw 1 1", "build.log": None})  # the last: Mininet's cleanup
    assert sorted(line.split(":")[0] for line in differences(BEFORE, after)) == [
        "tmp build.log", "tmp fl-bfd.sock", "tmp frr_leaf1", "tmp mininet.run"]


def test_everything_else_still_counts_whatever_its_name() -> None:
    after = {**BEFORE, "sysctls": {"net.ipv4.ip_forward": "1"}}
    assert differences(BEFORE, after) == ["sysctls net.ipv4.ip_forward: 0 -> 1"]
