"""The Mininet side of the mininet runtime; runs under Debian's python3, which has Mininet.

Imports only Mininet and the standard library (the project's venv has neither). It makes one
Mininet host per node (a shell in a new network namespace, no switch, no OVS, no
controller), writes `{node: pid}` to the pids file, and then either waits to be killed (a
detached lab) or, with `--cli`, waits for the lab to be built and runs Mininet's CLI on its
own stdin and stdout: `r1 ping r2`, `r1 vtysh`, `xterm r1`, with node names as in the file.

    python3 mininet_net.py NODES_JSON PIDS_FILE [--cli READY_FILE]

READY_FILE holds {node: [[iface, ipv4/len], ...]} once the lab is wired and FRR runs, so the
CLI knows every host's interfaces and addresses (Mininet itself made none of them). `lo`
comes first with the node's loopback, so `host1 ping host4` pings host4's loopback, which
every node routes to.
"""

import json
import os
import signal
import sys
import time
from pathlib import Path
from resource import RLIMIT_NOFILE

from mininet.cli import CLI
from mininet.link import Intf
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.util import rlimitTestAndSet


class PlannedIntf(Intf):
    """An interface fabric-lab made: its address is the plan's, not whatever `ifconfig` lists
    first (for `lo`, 127.0.0.1), so the CLI puts a node's loopback for its name."""

    def updateIP(self):
        return self.ip


def main():
    nodes_file, pids_file = sys.argv[1], sys.argv[2]
    ready_file = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--cli" else None
    setLogLevel("warning")
    # Mininet.init() would run fixLimits: host-wide sysctls (the ARP table's limits, socket
    # buffers, fs.file-max, kernel.pty.max) raised for good. A lab changes nothing on the
    # host that is not its own (deploy checks the neighbour tables' room itself); only this
    # process's own file limit is raised, for one pty per node.
    Mininet.inited = True
    rlimitTestAndSet(RLIMIT_NOFILE, 16384)
    net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False)
    hosts = [net.addHost(name, ip=None) for name in json.loads(Path(nodes_file).read_text())]
    partial = pids_file + ".partial"
    with open(partial, "w") as f:
        json.dump({h.name: h.pid for h in hosts}, f)
    os.rename(partial, pids_file)
    if ready_file is None:
        signal.pause()  # until destroy kills us; the hosts' shells end with their ptys
        return
    while not os.path.exists(ready_file):
        time.sleep(0.05)
    for name, interfaces in json.loads(Path(ready_file).read_text()).items():
        host = net.get(name)
        for iface, address in interfaces:  # `lo` first: a node's name means its loopback
            # Already in the host's namespace: Mininet must not move it, nor re-address it.
            intf = PlannedIntf(iface, node=host, moveIntfFn=lambda intf, node: True)
            intf.ip, intf.prefixLen = address.split("/")[0], int(address.split("/")[1])
    setLogLevel("output")  # what the CLI prints is at this level
    CLI(net)


if __name__ == "__main__":
    main()
