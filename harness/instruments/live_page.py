"""The live view's page: the lab's drawing (harness/topology/drawing.py) with a panel of faults,
the event stream and, in training, the exercise's story; a script polls `/state` (live.py) and
colours each link by its state, writes its rate beside it and fills the panels."""

from __future__ import annotations

import html

from harness.topology.drawing import to_html
from harness.topology.plan import LabPlan

POLL_MS = 500

STYLE = """<style>
body{display:flex;gap:1em;align-items:flex-start}
#graph{flex:3;min-width:0} #side{flex:1;font-size:13px;max-width:32em}
#events{font-family:monospace;white-space:pre;overflow:auto;max-height:70vh;font-size:11px}
path.link[data-state=down]{stroke:#d11;stroke-opacity:1;stroke-width:3;stroke-dasharray:8 5}
path.link[data-state="sessions down"]{stroke:#e80;stroke-opacity:1;stroke-width:3}
text.rate{font-size:10px;fill:#333}
#stamp{color:#777}
</style>"""

SCRIPT = """<script>
const svg = document.querySelector("#graph svg");
async function poll() {
  try {
    const state = await (await fetch("/state")).json();
    for (const [name, link] of Object.entries(state.links)) {
      const path = svg.querySelector(`path[data-link="${CSS.escape(name)}"]`);
      if (!path) continue;
      path.dataset.state = link.state;
      let label = svg.querySelector(`text[data-rate="${CSS.escape(name)}"]`);
      if (!label) {
        const mid = path.getPointAtLength(path.getTotalLength() / 2);
        label = document.createElementNS("http://www.w3.org/2000/svg", "text");
        label.setAttribute("class", "rate"); label.dataset.rate = name;
        label.setAttribute("x", mid.x + 3); label.setAttribute("y", mid.y - 3);
        svg.appendChild(label);
      }
      label.textContent = link.state === "up" ? link.rate : link.state;
    }
    document.getElementById("faults").textContent = state.faults.join(", ") || "none";
    document.getElementById("events").textContent = state.events.slice().reverse().join("\\n");
    document.getElementById("stamp").textContent =
      "as of " + new Date(state.time * 1000).toLocaleTimeString();
  } catch (e) {
    document.getElementById("stamp").textContent = "the lab does not answer: " + e;
  }
  setTimeout(poll, %(poll)d);
}
poll();
</script>"""


def page(plan: LabPlan, training: tuple[str, str] | None = None) -> str:
    """`training`: the running exercise's title and story."""
    drawing = to_html(plan)
    body = drawing[drawing.index("<body>") + len("<body>"):drawing.index("</body>")]
    story = "" if training is None else (
        f"<h2>{html.escape(training[0])}</h2><p>{html.escape(training[1])}</p>")
    side = (f'<div id="side">{story}<p id="stamp"></p><h2>Faults in place</h2>'
            '<p id="faults"></p><h2>Events (newest first)</h2><div id="events"></div></div>')
    head = drawing[:drawing.index("<body>")].replace("</head>", STYLE + "</head>")
    return (f'{head}<body><div id="graph">{body}</div>{side}'
            f"{SCRIPT % {'poll': POLL_MS}}</body></html>\n")
