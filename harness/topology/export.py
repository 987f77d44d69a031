"""A lab as containerlab and clabernetes files, for when it outgrows one machine.

Every node becomes `kind: linux` on the image the docker runtime builds (images/: FRR inside),
with its rendered frr.conf and a daemons file bound at /etc/frr. The link addresses and
loopbacks the plan chose go into frr.conf as `interface` stanzas, so the file needs nothing
of fabric-lab to come up. clabernetes gets the same topology in a `Topology` whose files come
from one ConfigMap per node, as its clabverter writes them.

What the lab runs beyond FRR does not go with it yet; `left_behind` names each such thing and
where, and the export says it on the console and at the top of the file it writes.
"""

from __future__ import annotations

from harness.topology.loader import dump_yaml
from harness.topology.plan import LabPlan, NodePlan
from harness.topology.render import render_frr
from harness.topology.schema import Kind, Role

# Where the image's FRR logs (images/: Debian's frr package) and how it starts in it.
CONTAINER_LOG = "/var/log/frr/frr.log"
FRR_START = "/usr/lib/frr/frrinit.sh start"
CLABERNETES_API = "clabernetes.containerlab.dev/v1alpha1"
NAMES_SHOWN = 6  # of a long list of nodes, the first few and how many more


def interfaces_config(node: NodePlan) -> str:
    """The addresses fabric-lab's wiring sets, as FRR config."""
    lines = ["interface lo", f" ip address {node.loopback4}/32",
             f" ipv6 address {node.loopback6}/128", "exit", "!"]
    for iface in node.interfaces:
        lines += [f"interface {iface.name}", f" ip address {iface.ipv4}",
                  f" ipv6 address {iface.ipv6}", "exit", "!"]
    return "\n".join(lines) + "\n"


def daemons_file(daemons: list[str]) -> str:
    return "".join(f"{d}=yes\n" for d in daemons if d != "zebra") + "vtysh_enable=yes\n"


def node_files(plan: LabPlan, node: NodePlan) -> dict[str, str]:
    """Relative path -> text of the files a node's binds point at."""
    if node.role is None:
        raise ValueError(f"{node.name} is configured by its own files; export the lab's "
                         "topology file as it is")
    daemons = ["zebra", "bgpd", "staticd", *(["bfdd"] if plan.bfd else [])]
    return {f"{node.name}/frr.conf": interfaces_config(node) + render_frr(plan, node,
                                                                           CONTAINER_LOG),
            f"{node.name}/daemons": daemons_file(daemons)}


def left_behind(plan: LabPlan) -> list[str]:
    """What the lab runs that its export does not, a line each, naming where."""
    def nodes(kind: Kind) -> list[str]:
        return [n.name for n in plan.nodes if n.kind is kind]

    lines = []
    if switches := nodes(Kind.sai):
        platforms = sorted({n.platform for n in plan.nodes if n.platform})
        lines.append("SAI switches run as plain FRR routers, zebra programming the kernel: no "
                     "SAI agent, configuration document or platform daemon"
                     + (f" (platforms {', '.join(platforms)})" if platforms else "")
                     + f": {some(switches)}")
    if plan.bfd and plan.bfd.offload:
        lines.append("BFD runs in bfdd's own packet loop, not in each node's offload engine")
    if hosts := nodes(Kind.host):
        probes = ", the data-plane probes" if plan.probes else ""
        lines.append(f"hosts use kernel ECMP over their planes: no per-packet spraying{probes} "
                     f"or BFD-steered plane failover: {some(hosts)}")
    lines += [f"link {link.a} -- {link.b}: {link.impairment.describe()}"
              + (" and a lossless class" if link.impairment.lossless else "") + " not applied"
              for link in plan.links if not link.impairment.is_clean]
    if plan.qos:
        lines.append("the lossless RDMA class (DSCP and queue maps, ECN marking, PFC, the "
                     "switches' buffers) is not configured")
    if plan.srv6:
        lines.append(f"SRv6: no locators, SIDs or TE policies ({len(plan.srv6.policies)}) are "
                     "programmed")
    return lines


def some(names: list[str]) -> str:
    more = len(names) - NAMES_SHOWN
    return ", ".join(names[:NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")


def header(plan: LabPlan) -> str:
    """The comment a file the export writes starts with: what it leaves behind."""
    lines = left_behind(plan)
    if not lines:
        return ""
    return (f"# exported by fabric-lab from {plan.source}; left behind (not in this file):\n"
            + "".join(f"# - {line}\n" for line in lines))


def clab_topology(plan: LabPlan, images: dict[str, str]) -> dict:
    """`images`: role-less image reference by kind of node ('switch', 'host')."""
    nodes = {}
    for node in plan.nodes:
        image = images["host" if node.role is Role.host else "switch"]
        nodes[node.name] = {
            "kind": "linux", "image": image,
            "labels": {**node.labels, "fabric-lab.role": node.role.value if node.role else ""},
            "binds": [f"{node.name}/frr.conf:/etc/frr/frr.conf",
                      f"{node.name}/daemons:/etc/frr/daemons:ro"],
            "exec": [FRR_START, *node.exec]}
    links = []
    for link in plan.links:
        entry: dict = {"endpoints": [str(link.a), str(link.b)]}
        if link.mtu != 1500:
            entry["mtu"] = link.mtu
        links.append(entry)
    return {"name": plan.name, "topology": {"nodes": nodes, "links": links}}


def export_clab(plan: LabPlan, images: dict[str, str]) -> dict[str, str]:
    """Relative path -> text: `<lab>.clab.yml` and every node's files."""
    files = {f"{plan.name}.clab.yml": header(plan) + dump_yaml(clab_topology(plan, images))}
    for node in plan.nodes:
        files.update(node_files(plan, node))
    return files


def export_clabernetes(plan: LabPlan, images: dict[str, str], namespace: str) -> dict[str, str]:
    """One manifest: a ConfigMap per node with its files, then the Topology using them."""
    documents: list[dict] = []
    files_from: dict[str, list[dict[str, str]]] = {}
    for node in plan.nodes:
        name = f"{plan.name}-{node.name}-files".lower().replace("_", "-")
        data = {path.split("/", 1)[1]: text for path, text in node_files(plan, node).items()}
        documents.append({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": name, "namespace": namespace}, "data": data})
        files_from[node.name] = [{"filePath": f"{node.name}/{key}", "configMapName": name,
                                  "configMapPath": key} for key in data]
    documents.append({
        "apiVersion": CLABERNETES_API, "kind": "Topology",
        "metadata": {"name": plan.name.lower().replace("_", "-"), "namespace": namespace},
        "spec": {"definition": {"containerlab": dump_yaml(clab_topology(plan, images))},
                 "deployment": {"filesFromConfigMap": files_from}}})
    return {f"{plan.name}.clabernetes.yaml": header(plan) + "---\n".join(
        dump_yaml(d) for d in documents)}
