#!/usr/bin/env python3
"""A tiny upstream for the demo: answers 200 "hello from upstream" on any path.

Like an application, it reads the whole request body (content-length or
chunked) before it answers: the installation demo's sign-in requests carry
their account in a JSON body."""
import argparse
import http.server
import signal
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b"hello from upstream\n"

    def _read_body(self):
        """Reads the whole body; False when the connection ends first."""
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            while True:
                line = self.rfile.readline()
                if not line:
                    return False
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    # trailers, up to the empty line
                    while True:
                        line = self.rfile.readline()
                        if not line:
                            return False
                        if line in (b"\r\n", b"\n"):
                            return True
                if len(self.rfile.read(size)) < size or not self.rfile.readline():
                    return False
        length = int(self.headers.get("content-length") or 0)
        return len(self.rfile.read(length)) == length if length else True

    def _answer(self, with_body=True):
        if not self._read_body():
            # The request was abandoned before its body arrived: with the
            # installation demo, a sign-in attempt the filter refused after
            # the headers had gone on (it holds the body to read the
            # account). Nobody is left to answer.
            sys.stderr.write(f"upstream.py: {self.command} {self.path}: the connection "
                             "ended before the request body did; not answered\n")
            self.close_connection = True
            return
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
