"""A lab as containerlab and clabernetes files, for when it outgrows one machine.

Every node becomes `kind: linux` on the image the docker runtime builds (images/: FRR inside),
with its rendered frr.conf and a daemons file bound at /etc/frr. The link addresses and
loopbacks the plan chose go into frr.conf as `interface` stanzas, so the file needs nothing
of fabric-lab to come up. clabernetes gets the same topology in a `Topology` whose files come
from one ConfigMap per node, as its clabverter writes them.

What the lab runs beyond FRR does not go with it yet; `left_behind` names each such thing and
where, and the export says it on the console and at the top of the file it writes.

A link's delay, jitter, loss and rate travel to containerlab through its own netem tooling:
the clab export writes `impairments.sh`, `containerlab tools netem set` on the egress of both
ends of each impaired link, as fabric-lab sets them, for a host whose kernel has sch_netem.

The images are built here, with no registry: `--images` writes the ones the lab runs as one
tarball beside the files, and a script that loads them into another host's docker, or pushes
them to a registry a cluster pulls from (the files then name them there).
"""

from __future__ import annotations

from harness.topology.loader import dump_yaml
from harness.topology.plan import Impairment, LabPlan, NodePlan
from harness.topology.render import render_frr
from harness.topology.schema import Kind, Role

# Where the image's FRR logs (images/: Debian's frr package) and how it starts in it.
CONTAINER_LOG = "/var/log/frr/frr.log"
FRR_START = "/usr/lib/frr/frrinit.sh start"
CLABERNETES_API = "clabernetes.containerlab.dev/v1alpha1"
NAMES_SHOWN = 6  # of a long list of nodes, the first few and how many more
IMAGES_TARBALL = "images.tar"
IMPAIRMENTS_SCRIPT = "impairments.sh"
CLAB_PREFIX = "clab"  # containerlab's container of a node: clab-<lab>-<node>
LOAD_SCRIPT = "load-images.sh"


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


def left_behind(plan: LabPlan, *, netem: bool = False) -> list[str]:
    """What the lab runs that its export does not, a line each, naming where; `netem`: the
    export sets the links' impairments through containerlab's netem tooling."""
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
    for link in plan.links:
        imp = link.impairment
        stays = beyond_netem(imp) if netem else [
            *([imp.describe()] if netem_flags(imp) or imp.duplicate_pct else []),
            *(["a lossless class"] if imp.lossless else [])]
        if stays:
            lines.append(f"link {link.a} -- {link.b}: {', '.join(stays)} not applied")
    if plan.qos:
        lines.append("the lossless RDMA class (DSCP and queue maps, ECN marking, PFC, the "
                     "switches' buffers) is not configured")
    if plan.srv6:
        lines.append(f"SRv6: no locators, SIDs or TE policies ({len(plan.srv6.policies)}) are "
                     "programmed")
    return lines


def netem_flags(impairment: Impairment) -> list[str]:
    """`containerlab tools netem set`'s flags for what it can set of an impairment."""
    flags = [f"--delay {round(impairment.delay_us * 1000)}ns"] if impairment.delay_us else []
    if impairment.jitter_us:
        flags.append(f"--jitter {round(impairment.jitter_us * 1000)}ns")
    if impairment.loss_pct:
        flags.append(f"--loss {impairment.loss_pct:g}")
    if impairment.rate_bps:
        flags.append(f"--rate {max(1, impairment.rate_bps // 1000)}")  # kbit/s
    return flags


def beyond_netem(impairment: Impairment) -> list[str]:
    """What containerlab's netem tooling cannot set of an impairment."""
    return ([f"duplicate {impairment.duplicate_pct:g}%"] if impairment.duplicate_pct else []) \
        + (["a lossless class"] if impairment.lossless else [])


def impairments_script(plan: LabPlan) -> str | None:
    """Sets the lab's link impairments on containerlab's nodes (None: it has none)."""
    commands = [f"containerlab tools netem set -n {CLAB_PREFIX}-{plan.name}-{end.node} "
                f"-i {end.iface} {' '.join(flags)}"
                for link in plan.links if (flags := netem_flags(link.impairment))
                for end in (link.a, link.b)]
    if not commands:
        return None
    return "\n".join([
        "#!/bin/sh",
        "# Written by `labctl export`: each impaired link's delay, jitter, loss and rate, set on",
        "# the egress of both of its ends as fabric-lab sets them. Run it after `containerlab",
        "# deploy`, on a host whose kernel has sch_netem.", "set -eu", *commands]) + "\n"


def some(names: list[str]) -> str:
    more = len(names) - NAMES_SHOWN
    return ", ".join(names[:NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")


def header(plan: LabPlan, *, netem: bool = False) -> str:
    """The comment a file the export writes starts with: what it leaves behind."""
    lines = left_behind(plan, netem=netem)
    if not lines:
        return ""
    return (f"# exported by fabric-lab from {plan.source}; left behind (not in this file):\n"
            + "".join(f"# - {line}\n" for line in lines))


def image_kind(node: NodePlan) -> str:
    return "host" if node.role is Role.host else "switch"


def used_images(plan: LabPlan, images: dict[str, str]) -> list[str]:
    """The references of the images the lab's nodes run, each once."""
    return sorted({images[image_kind(node)] for node in plan.nodes})


def in_registry(reference: str, registry: str) -> str:
    return f"{registry.rstrip('/')}/{reference}"


def load_script(images: list[str], registry: str | None) -> str:
    """Loads IMAGES_TARBALL into docker and, for an export written for a registry, tags and
    pushes each image there."""
    lines = ["#!/bin/sh", "# Written by `labctl export --images`: the images this lab runs, "
             "built by fabric-lab.", "set -eu", 'cd "$(dirname "$0")"',
             f"docker load -i {IMAGES_TARBALL}"]
    for image in images if registry else []:
        pushed = in_registry(image, registry)
        lines += [f"docker tag {image} {pushed}", f"docker push {pushed}"]
    return "\n".join(lines) + "\n"


def clab_topology(plan: LabPlan, images: dict[str, str]) -> dict:
    """`images`: role-less image reference by kind of node ('switch', 'host')."""
    nodes = {}
    for node in plan.nodes:
        image = images[image_kind(node)]
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
    """Relative path -> text: `<lab>.clab.yml`, every node's files and IMPAIRMENTS_SCRIPT."""
    files = {f"{plan.name}.clab.yml": header(plan, netem=True)
             + dump_yaml(clab_topology(plan, images))}
    for node in plan.nodes:
        files.update(node_files(plan, node))
    if script := impairments_script(plan):
        files[IMPAIRMENTS_SCRIPT] = script
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
