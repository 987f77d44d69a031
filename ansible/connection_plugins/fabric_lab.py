"""An ansible connection into a fabric-lab node, on any runtime (netns, docker, mininet).

No runtime's own plugin fits all three: a netns node has no sshd and shares the host's files,
a docker node is a container. This one asks the lab's runtime to run each command inside the
node, as `labctl exec` does, with the data ansible pipes in; files go in and out through the
same commands (`cat`), so it needs nothing in the node but a shell and python3.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.plugins.connection import ConnectionBase

DOCUMENTATION = """
name: fabric_lab
short_description: run tasks inside a node of a running fabric-lab lab
description:
  - Runs each command inside the node through the lab's runtime (netns, docker or mininet).
  - The inventory `labctl ansible-inventory LAB` writes sets everything it needs.
options:
  lab:
    description: the lab's name
    vars:
      - name: fabric_lab
"""


class Connection(ConnectionBase):
    transport = "fabric_lab"
    has_pipelining = True

    def _connect(self) -> Connection:
        if not self._connected:
            from harness.core.errors import FabricLabError
            from harness.deploy.lab import Lab

            try:
                self._lab = Lab.open(self.get_option("lab"))
                self._node = self._play_context.remote_addr  # ansible_host: the node
                self._lab.node(self._node)  # an unknown node fails here, by name
            except FabricLabError as exc:
                raise AnsibleConnectionFailure(str(exc)) from None
            self._connected = True
        return self

    def exec_command(self, cmd: str, in_data: bytes | None = None,
                     sudoable: bool = True) -> tuple[int, bytes, bytes]:
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        self._connect()
        proc = self._lab.runtime.popen(self._node, ["/bin/sh", "-c", cmd],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)
        stdout, stderr = proc.communicate(in_data)
        return proc.returncode, stdout, stderr

    def put_file(self, in_path: str, out_path: str) -> None:
        super().put_file(in_path, out_path)
        status, _, stderr = self.exec_command(f"cat > {shlex.quote(out_path)}",
                                              in_data=Path(in_path).read_bytes())
        if status:
            raise AnsibleError(f"{self._node}: cannot write {out_path}: {stderr.decode()}")

    def fetch_file(self, in_path: str, out_path: str) -> None:
        super().fetch_file(in_path, out_path)
        status, stdout, stderr = self.exec_command(f"cat {shlex.quote(in_path)}")
        if status:
            raise AnsibleError(f"{self._node}: cannot read {in_path}: {stderr.decode()}")
        Path(out_path).write_bytes(stdout)

    def close(self) -> None:
        self._connected = False
