"""The nightly report as one self-contained HTML page: the run's steps and labs as tables, and
plots of what they measured (latency CDF, bus bandwidth against message size, outage per fault
type, convergence per lab), with the history of earlier runs when their reports are given.
Inline SVG and CSS only: the page opens from an archive, offline, as it was written.

A short inline script marks each plot with what the browser drew (`data-drawn`: marks with
a non-empty box), so a headless browser can tell a rendered plot from an empty frame."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from html import escape
from typing import Any

from harness.testing.svgplot import bar_chart, line_chart

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; }
.ok { color: #1a7f37; } .fail { color: #cf222e; font-weight: bold; } .skip { color: #9a6700; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; }
svg.plot { border: 1px solid #ddd; background: #fff; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
svg .title { font-size: 13px; font-weight: bold; } svg .empty { fill: #888; }
svg .axis { stroke: #333; } svg .grid { stroke: #eee; }
"""
MEASURE = """
document.querySelectorAll("svg.plot").forEach(function (svg) {
  var drawn = 0;
  svg.querySelectorAll(".mark").forEach(function (m) {
    var box = m.getBBox(); if (box.width > 0 || box.height > 0) drawn++;
  });
  svg.setAttribute("data-drawn", drawn);
});
"""


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], table_id: str) -> str:
    """`rows` hold HTML already escaped."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>"
                   for row in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _status(code: int | None, skipped: str | None = None) -> str:
    if skipped:
        return f'<span class="skip">skipped</span> {escape(skipped)}'
    if code == 0:
        return '<span class="ok">ok</span>'
    return f'<span class="fail">FAILED ({code})</span>'


def _labs(report: dict[str, Any]) -> list[dict[str, Any]]:
    return report.get("labs", [])


def _validated(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [lab for lab in _labs(report) if lab.get("validation")]


def fault_kind(record: dict[str, Any]) -> str:
    return record.get("kind") or record["fault"].split("(")[0]


def latency_cdf(report: dict[str, Any]) -> str:
    series = {}
    for lab in _validated(report):
        rtts = sorted(r for p in lab["validation"]["pairs"] for r in p.get("rtts_us", ()))
        series[lab["lab"]] = [(r, (i + 1) / len(rtts)) for i, r in enumerate(rtts)]
    return line_chart("latency-cdf", "Round-trip latency CDF (64 B, host pairs)", series,
                      x_label="round trip (us, log)", y_label="fraction of round trips",
                      x_log=True, step=True)


def busbw(report: dict[str, Any]) -> list[str]:
    charts = []
    for lab in _validated(report):
        rows = lab["validation"]["collectives"]
        widest = max((r["hosts"] for r in rows), default=0)
        series: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for r in rows:
            if r["hosts"] == widest:
                series[r["collective"]].append((r["size"], r["busbw_GBps"]))
        charts.append(line_chart(f"busbw-{lab['lab']}", f"{lab['lab']}: busbw vs message size "
                                 f"({widest} hosts)", series, x_label="bytes per rank (log)",
                                 y_label="busbw (GB/s)", x_log=True))
    return charts or [line_chart("busbw", "busbw vs message size", {}, x_label="",
                                 y_label="")]


def outages(report: dict[str, Any]) -> str:
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in report.get("faults", []):
        if not r["fault"].startswith("undo "):
            found[fault_kind(r)][r.get("lab") or r["test"].split("::")[0].rsplit("/")[-1]
                                 ].append(r["outage_ms"])
    groups = {kind: {who: max(v) for who, v in by.items()} for kind, by in found.items()}
    return bar_chart("outage-per-fault", "Outage per fault type (worst flow, ms)", groups,
                     y_label="outage (ms)", x_label="fault type")


def convergence(report: dict[str, Any]) -> str:
    groups = {lab["lab"]: {"deploy": lab["deploy_s"], "converge": lab["converge_s"]}
              for lab in _labs(report) if "deploy_s" in lab}
    return bar_chart("convergence", "Deploy and convergence per lab (s)", groups,
                     y_label="seconds", x_label="lab")


def history(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Figures across runs, oldest first (the current run last)."""
    converge: dict[str, list[tuple[float, float]]] = defaultdict(list)
    rtt: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for i, run in enumerate(runs, 1):
        for lab in _labs(run):
            if "converge_s" in lab:
                converge[lab["lab"]].append((i, lab["converge_s"]))
            pairs = (lab.get("validation") or {}).get("pairs", [])
            if pairs:
                rtt[lab["lab"]].append((i, statistics.median(p["rtt_p50_us"] for p in pairs)))
    runs_label = "run (1 = oldest given, " + str(len(runs)) + " = this one)"
    if len(runs) < 2:
        converge, rtt = {}, {}
    empty = "no earlier reports given (bench/nightly.py --history DIR ...)"
    return [line_chart("history-convergence", "Convergence across runs (s)", converge,
                       x_label=runs_label, y_label="seconds", empty=empty),
            line_chart("history-latency", "Median round trip across runs (us)", rtt,
                       x_label=runs_label, y_label="us", empty=empty)]


def render(report: dict[str, Any], earlier: Sequence[dict[str, Any]] = ()) -> str:
    steps = _table(("step", "status", "duration", "what", "log"), [
        (escape(s["name"]), _status(s["exit"]), f'{s["seconds"]:.0f} s', escape(s["why"]),
         f'<a href="{escape(s["log"])}">{escape(s["log"])}</a>')
        for s in report.get("steps", [])], "steps")
    labs = _table(("lab", "nodes", "status", "deploy s", "converge s", "p2p GB/s", "rtt p50 us",
                   "checks", "faults measured", "evidence"), [
        (escape(lab["lab"]), str(lab["nodes"]),
         _status(1 if lab.get("error") else 0, lab.get("skipped")) +
         (f" {escape(lab['error'])}" if lab.get("error") else ""),
         f'{lab.get("deploy_s", "-")}', f'{lab.get("converge_s", "-")}',
         f'{lab["validation"]["p2p_GBps"]:.2f}' if lab.get("validation") else "-",
         f'{statistics.median(p["rtt_p50_us"] for p in lab["validation"]["pairs"]):.0f}'
         if lab.get("validation") else "-",
         _checks(lab), str(len(lab.get("faults", []))) + "".join(
             f"<br>{escape(n)}" for n in lab.get("notes", [])),
         escape(lab.get("evidence", "")))
        for lab in _labs(report)], "labs")
    faults = _table(("lab or test", "fault", "flow", "outage ms", "lost / sent"), [
        (escape(r.get("lab") or r["test"]), escape(r["fault"]), escape(r["flow"]),
         f'{r["outage_ms"]:.1f}', f'{r["lost"]} / {r["sent"]}')
        for r in report.get("faults", [])], "faults")
    totals = report.get("junit", {})
    plots = [latency_cdf(report), *busbw(report), outages(report), convergence(report)]
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>fabric-lab nightly {escape(report['stamp'])}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>fabric-lab nightly {escape(report['stamp'])}</h1>",
        f"<p>{escape(report.get('host', ''))}. JUnit: {totals.get('tests', 0)} tests, "
        f"{totals.get('failures', 0)} failures, {totals.get('errors', 0)} errors, "
        f"{totals.get('skipped', 0)} skipped (<a href=\"junit.xml\">junit.xml</a>, "
        "<a href=\"report.json\">report.json</a>).</p>",
        "<h2>Steps</h2>", steps, "<h2>Labs</h2>", labs,
        '<h2>Plots</h2><div class="plots">', *plots, "</div>",
        f"<h2>History ({len(earlier)} earlier run(s) given)</h2>",
        '<div class="plots">', *history([*earlier, report]), "</div>",
        "<h2>Faults measured</h2>", faults,
        f"<script>{MEASURE}</script></body></html>"])


def _checks(lab: dict[str, Any]) -> str:
    checks = (lab.get("validation") or {}).get("checks", [])
    if not checks:
        return "-"
    failed = [c["check"] for c in checks if not c["ok"]]
    return (f'<span class="ok">{len(checks)} passed</span>' if not failed else
            '<span class="fail">failed:</span> ' + escape("; ".join(failed)))
