"""Run the test API server by hand: ``cd tests && python -m kubeapi --kubeconfig /tmp/kc``.

Optionally loads objects (a JSON List, or one object per line) before serving.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading

from .server import KubeAPIServer


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m kubeapi")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--kubeconfig", help="write a kubeconfig for this server here")
    ap.add_argument("--load", help="JSON file: a List (items) or one object per line")
    ap.add_argument("--bookmark-interval", type=float, default=60.0)
    ap.add_argument("--history-size", type=int, default=100_000)
    args = ap.parse_args()
    server = KubeAPIServer(
        args.host, args.port, bookmark_interval=args.bookmark_interval, history_size=args.history_size
    )
    if args.load:
        with open(args.load) as f:
            text = f.read()
        try:
            doc = json.loads(text)
            objs = doc.get("items", [doc]) if isinstance(doc, dict) else doc
        except ValueError:
            objs = [json.loads(line) for line in text.splitlines() if line.strip()]
        for obj in objs:
            server.store.seed(obj)
    server.start()
    if args.kubeconfig:
        server.write_kubeconfig(args.kubeconfig)
    print(
        f"kubeapi listening on {server.url}" + (f", kubeconfig {args.kubeconfig}" if args.kubeconfig else ""),
        flush=True,
    )
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    server.stop()


if __name__ == "__main__":
    main()
