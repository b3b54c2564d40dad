"""The floor of `make bench-peers` (benches/peers.rs): a plain list-then-watch loop on
Pods with no framework (stdlib only), appending the time (ns) and each object's name to
$OUT. Reads the server address from $KUBE_URL: kube-sim serves plain http; the real
API server https, with the bearer token in $KUBE_TOKEN (the certificate is not checked:
loopback, test CA)."""
import http.client
import json
import os
import ssl
import time
import urllib.parse

OUT = os.environ["OUT"]
URL = urllib.parse.urlparse(os.environ["KUBE_URL"])
TOKEN = os.environ.get("KUBE_TOKEN")
HEADERS = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}


def connect():
    if URL.scheme == "https":
        return http.client.HTTPSConnection(
            URL.hostname, URL.port, context=ssl._create_unverified_context()
        )
    return http.client.HTTPConnection(URL.hostname, URL.port)


def initial_list(out):
    conn = connect()
    conn.request("GET", "/api/v1/pods", headers=HEADERS)
    body = json.loads(conn.getresponse().read())
    now = time.time_ns()
    out.write("".join(f"{now} {p['metadata']['name']}\n" for p in body["items"]))
    out.flush()
    return body["metadata"]["resourceVersion"]


def watch(out, rv):
    conn = connect()
    conn.request("GET", f"/api/v1/pods?watch=true&resourceVersion={rv}&allowWatchBookmarks=true", headers=HEADERS)
    stream = conn.getresponse()
    for line in stream:
        now = time.time_ns()
        event = json.loads(line)
        if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
            out.write(f"{now} {event['object']['metadata']['name']}\n")
            out.flush()


def main():
    with open(OUT, "a") as out:
        watch(out, initial_list(out))


if __name__ == "__main__":
    main()
