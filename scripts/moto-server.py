#!/usr/bin/env python3
"""moto's server (DynamoDB, DynamoDB Streams, SQS on one endpoint) with two
of its defects worked around, for running `jobstream run` against a second
DynamoDB implementation (README: "Against another DynamoDB: moto").

    scripts/moto-server.py --port 5071 [--as-is]

Measured with moto 5.2.1 (`--as-is` serves moto unchanged):

1. A cancelled TransactWriteItems puts back a deep copy of every table it
   named, stream shard included: a shard iterator handed out before reads
   the discarded shard for ever (GetRecords returns no new record, though
   the table's stream has them); DynamoDB cancels a transaction without
   touching the stream. Fixed here by carrying the live shard over to the
   restored table (with the restored copy's records: what the cancelled
   transaction wrote is gone, as in DynamoDB).
2. Requests are served on threads without a lock, and TransactWriteItems
   deep-copies a table while other requests change it: `RuntimeError:
   dictionary changed size during iteration`, answered as a 500; a restore
   also drops what concurrent requests wrote meanwhile. Fixed here by
   serving one DynamoDB request at a time.

scripts/moto-repro.py reproduces both against an unchanged moto_server.
"""
import argparse
import threading

from moto.dynamodb.models import DynamoDBBackend
from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


def keep_live_shards(backend_cls):
    original = backend_cls.transact_write_items

    def transact_write_items(self, transact_items):
        live = {name: t.stream_shard for name, t in self.tables.items()}
        try:
            return original(self, transact_items)
        finally:
            for name, table in self.tables.items():
                shard = live.get(name)
                restored = table.stream_shard
                if shard is not None and restored is not None and restored is not shard:
                    shard.items[:] = restored.items
                    shard.table = table
                    table.stream_shard = shard

    backend_cls.transact_write_items = transact_write_items


def one_at_a_time(app):
    """DynamoDB and DynamoDB Streams requests one at a time (SQS's long
    polls must not hold them up)."""
    lock = threading.Lock()

    def serve(environ, start_response):
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB"):
            return app(environ, start_response)
        with lock:
            return list(app(environ, start_response))

    return serve


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-H", "--host", default="127.0.0.1")
    ap.add_argument("-p", "--port", type=int, default=5071)
    ap.add_argument("--as-is", action="store_true", help="moto unchanged (to see its defects)")
    a = ap.parse_args()
    app = DomainDispatcherApplication(create_backend_app)
    if not a.as_is:
        keep_live_shards(DynamoDBBackend)
        app = one_at_a_time(app)
    run_simple(a.host, a.port, app, threaded=True)


if __name__ == "__main__":
    main()
