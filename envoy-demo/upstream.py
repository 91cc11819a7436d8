#!/usr/bin/env python3
"""A tiny upstream for the demo: answers 200 "hello from upstream" on any path."""
import argparse
import http.server
import signal
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b"hello from upstream\n"

    def _answer(self, with_body=True):
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        if with_body:
            self.wfile.write(self.body)

    def do_GET(self):
        self._answer()

    def do_HEAD(self):
        self._answer(with_body=False)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def log_message(self, fmt, *args):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=10001)
    args = ap.parse_args()
    srv = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    srv.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        srv.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        srv.server_close()


if __name__ == "__main__":
    main()
