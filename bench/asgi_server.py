"""Serve the same runtime (snapshot source) with uvicorn, for the server comparison: `python bench/asgi_server.py SNAPSHOT PORT`."""

import sys
from concurrent.futures import ThreadPoolExecutor

import uvicorn
from asgi_app import asgi
from hami_fast.config import Config
from hami_fast.server.app import App
from hami_fast.server.serve import build_runtime

if __name__ == "__main__":
    runtime = build_runtime(Config(snapshot=sys.argv[1], metrics_bind_address=""))
    app = asgi(App(runtime.scheduler, ThreadPoolExecutor(8)))
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False, lifespan="off")
