"""platform: a SAI switch's emulated platform (power, thermal, inventory, out-of-band,
firmware, diagnostics): show it, fail a part (a fan, a PSU, a sensor's reading), set one back,
flash firmware. The platform daemon acts on the dataplane: an ASIC past its critical
temperature shuts every port through SAI, and flashing the SAI SDK restarts the agent warm."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table

from harness.cli.console import make_console
from harness.cli.sai import sai_switch
from harness.nodes.switch.kind import restart_agent
from harness.nodes.switch.platform.lifecycle import platform_request
from harness.nodes.switch.platform.model import FIRMWARE

out = make_console()
WARM = "sai-sdk"  # the firmware the agent runs: flashing it restarts the agent, warm


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("platform", help="a switch's platform: PSUs, fans, sensors, "
                            "inventory, LEDs, firmware, diagnostics; fail parts, flash firmware")
    p.add_argument("node", help="NODE or LAB/NODE (a kind: sai switch)")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser("show", help="the platform's state, alarms and diagnostics")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    fail = actions.add_parser("fail", help="fail a part: fan NAME, psu NAME (pull it), "
                              "sensor NAME --celsius C (overheat it)")
    fail.add_argument("part", choices=("fan", "psu", "sensor"))
    fail.add_argument("name")
    fail.add_argument("--celsius", type=float, help="the sensor's reading")
    put = actions.add_parser("set", help="set a part: fan NAME ok, psu NAME present, sensor "
                             "NAME CELSIUS|auto, led NAME COLOUR, management up|down")
    put.add_argument("part", choices=("fan", "psu", "sensor", "led", "management"))
    put.add_argument("name", help="the part (management: the port's state)")
    put.add_argument("value", nargs="?", default="", help="its value")
    fw = actions.add_parser("firmware", help=f"flash firmware ({', '.join(FIRMWARE)}); "
                            f"{WARM} restarts the SAI agent warm")
    fw.add_argument("component", choices=sorted(FIRMWARE))
    fw.add_argument("version")
    p.set_defaults(run=platform)


def platform(args: argparse.Namespace) -> int:
    lab, node = sai_switch(args.node)
    if args.action == "show":
        shown = platform_request(lab, node, {"cmd": "show"})
        if args.json:
            print(json.dumps(shown, indent=2))
        else:
            print_platform(shown)
        return 0
    if args.action == "fail":
        state = platform_request(lab, node, {"cmd": "fail", "part": args.part,
                                             "name": args.name, "celsius": args.celsius})
    elif args.action == "set":
        part, name, value = args.part, args.name, args.value
        if part == "management":
            name, value = "management", args.name
        state = platform_request(lab, node, {"cmd": "set", "part": part, "name": name,
                                             "value": value})
    else:
        state = platform_request(lab, node, {"cmd": "firmware", "component": args.component,
                                             "version": args.version})
        if args.component == WARM:
            old, new = restart_agent(lab, node)
            out.print(f"{node}: {WARM} {args.version} flashed; SAI agent restarted warm "
                      f"(pid {old} -> {new}): the kernel forwarded throughout")
        else:
            out.print(f"{node}: {args.component} {args.version} flashed; it runs from the "
                      "next power cycle")
    alarms = state["alarms"]
    out.print(f"{node}: " + ("; ".join(alarms) if alarms else "no alarms"), highlight=False)
    return 0


def print_platform(shown: dict[str, Any]) -> None:
    out.print(f"[bold]{shown['node']}[/]: {shown['platform']} ({shown['asic']}), serial "
              f"{shown['serial']}; LEDs {', '.join(f'{k} {v}' for k, v in shown['leds'].items())};"
              f" management {shown['oob']['management']}, console {shown['oob']['console']}",
              highlight=False)
    parts = Table(title="power and thermal")
    for column in ("part", "state", "reading"):
        parts.add_column(column)
    for p in shown["psus"]:
        parts.add_row(p["name"], "present" if p["present"] else "[red]absent[/]",
                      f"{p['watts']:g} W")
    for f in shown["fans"]:
        parts.add_row(f["name"], "ok" if f["ok"] else "[red]failed[/]", f"{f['rpm']} rpm")
    for s in shown["sensors"]:
        parts.add_row(s["name"], "forced" if s["forced"] is not None else "model",
                      f"{s['celsius']:g} C (high {s['high']:g}, critical {s['critical']:g})")
    out.print(parts)
    out.print("firmware: " + ", ".join(f"{k} {v}" for k, v in shown["firmware"].items()) +
              f"; {len(shown['optics'])} optics", highlight=False)
    diag = Table(title="diagnostics")
    for column in ("test", "", "detail"):
        diag.add_column(column)
    for d in shown["diagnostics"]:
        diag.add_row(d["test"], "[green]pass[/]" if d["ok"] else "[red]FAIL[/]", d["detail"])
    out.print(diag)
    out.print("alarms: " + ("; ".join(shown["alarms"]) or "none"), highlight=False)
