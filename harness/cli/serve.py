"""serve: the live view of a running lab in a browser, on this host only (127.0.0.1): its graph
with each link's state and rate, the faults in place, the event stream, and an exercise's story
when one runs (harness/instruments/live.py, live_page.py)."""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness.cli.console import make_console
from harness.cli.labref import open_lab
from harness.cli.lifecycle import require_root
from harness.core.errors import LabError
from harness.deploy.lab import Lab
from harness.instruments.live import LiveState
from harness.instruments.live_page import page
from harness.training.attempt import ATTEMPT_FILE, Attempt

out = make_console()
LOOPBACK = "127.0.0.1"  # the lab's state is for this host's users, not the network's


def register(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("serve", help="a live view of a running lab in the browser: "
                            "link and session states, rates, faults, events")
    p.add_argument("name", nargs="?", metavar="LAB", help="the lab (default: the only one)")
    p.add_argument("--port", type=int, default=8642, help="on 127.0.0.1 (default %(default)s;"
                   " 0: any free one)")
    p.set_defaults(run=serve)


def training(lab: Lab) -> tuple[str, str] | None:
    """The running exercise's title and story, when the lab runs one."""
    path = lab.dir / ATTEMPT_FILE
    if not path.is_file():
        return None
    exercise = Attempt(**json.loads(path.read_text())).load_exercise()
    return exercise.title, exercise.story


def handler(lab: Lab) -> type[BaseHTTPRequestHandler]:
    state, lock, html = LiveState(lab), threading.Lock(), page(lab.plan, training(lab))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/":
                self._send("text/html; charset=utf-8", html.encode())
            elif self.path == "/state":
                with lock:
                    body = json.dumps(state.snapshot()).encode()
                self._send("application/json", body)
            else:
                self.send_error(404)

        def _send(self, kind: str, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a poll every half second is no news

    return Handler


def serve(args: argparse.Namespace) -> int:
    require_root()  # the rates are read inside the nodes' namespaces
    lab = open_lab(args.name)
    try:
        server = ThreadingHTTPServer((LOOPBACK, args.port), handler(lab))
    except OSError as exc:
        raise LabError(f"cannot serve on {LOOPBACK}:{args.port}: {exc.strerror}; "
                       "try --port 0") from None
    out.print(f"live view of {lab.plan.name}: http://{LOOPBACK}:{server.server_address[1]}/ "
              "(Ctrl-C stops)", highlight=False, soft_wrap=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
