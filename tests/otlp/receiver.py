"""A real OTLP/HTTP trace receiver for the tests: it decodes each
`POST /v1/traces` with OpenTelemetry's own protobuf definitions
(`pip install opentelemetry-proto`) and appends every span to a file as
one JSON line. It prints `listening PORT` once ready.

usage: receiver.py SPANS_FILE
"""

import gzip
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = sys.argv[1]


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def attrs(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
            self.send_response(400)
            self.end_headers()
            return
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        lines = []
        for rs in req.resource_spans:
            resource = attrs(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    lines.append(
                        json.dumps(
                            {
                                "service": resource.get("service.name"),
                                "scope": ss.scope.name,
                                "trace_id": s.trace_id.hex(),
                                "span_id": s.span_id.hex(),
                                "parent_span_id": s.parent_span_id.hex(),
                                "name": s.name,
                                "kind": s.kind,
                                "start_ns": s.start_time_unix_nano,
                                "end_ns": s.end_time_unix_nano,
                                "status": s.status.code,
                                "status_message": s.status.message,
                                "attributes": attrs(s.attributes),
                                "events": [
                                    {"name": e.name, "attributes": attrs(e.attributes)}
                                    for e in s.events
                                ],
                                "links": [
                                    {
                                        "trace_id": link.trace_id.hex(),
                                        "span_id": link.span_id.hex(),
                                        "attributes": attrs(link.attributes),
                                    }
                                    for link in s.links
                                ],
                            }
                        )
                    )
        with open(OUT, "a") as f:
            for line in lines:
                f.write(line + "\n")
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
