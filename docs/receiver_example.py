"""A minimal receiver for Sentinel webhooks: verify the signature, dedupe on webhook-id, store.

Run: SENTINEL_WEBHOOK_SECRET=whsec_... python docs/receiver_example.py 8808
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from sentinel.webhooks import VerificationError, verify

SECRETS = [os.environ["SENTINEL_WEBHOOK_SECRET"]]  # add the previous secret while rotating
seen: set[str] = set()  # use a table with a unique key in production


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        try:
            delivery_id = verify(body, dict(self.headers), SECRETS)
        except VerificationError as exc:
            self.send_response(401)
            self.end_headers()
            print("rejected:", exc, flush=True)
            return
        if delivery_id not in seen:  # at-least-once: a retry reuses the same id
            seen.add(delivery_id)
            finding = json.loads(body)
            print(delivery_id, finding["change"], finding["severity"], finding["title"], flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
