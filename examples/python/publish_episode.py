#!/usr/bin/python3
"""Publish a curated episode to Archivist, as a curating system would.

Only Python's standard library and Debian's python3-msgpack: this client
speaks the NATS protocol itself (CONNECT, SUB, HPUB, MSG/HMSG) and publishes
the msgpack envelope schemas/README.md describes, with the Nats-Msg-Id header
JetStream de-duplicates on; it also posts the same kind of record over HTTP
with an API key.

  publish_episode.py nats  [tls://]HOST:PORT USER PASSWORD EPISODE-ID SOURCE
  publish_episode.py http  BASE-URL TOKEN EPISODE-ID        (TOKEN "" sends none)

With tls://, the server's certificate is checked against the CA file of
$NATS_CA, and $NATS_CERT and $NATS_KEY, when set, are this system's client
certificate (mutual TLS). Replies come to the user's own inbox prefix,
_INBOX_<user>; the event's id is its Nats-Msg-Id, and JetStream's
acknowledgement is checked: an error there exits 1.

Each prints one JSON line: what the server answered.
"""

import datetime
import json
import os
import socket
import ssl
import sys
import urllib.error
import urllib.request
import uuid

import msgpack

TYPE = "curation.episode.upserted"


def subject(source):
    """Each source publishes on its own subject; its NATS user may publish
    nowhere else."""
    return "curation.%s.episode.upserted" % source


def payload(episode_id, source=None):
    """The EpisodeUpserted payload (schemas/curation.episode.upserted.v1.json)."""
    at = datetime.datetime(2026, 3, 13, 23, 0, tzinfo=datetime.timezone.utc)
    p = {
        "id": episode_id,
        "title": "Published from Python: " + episode_id,
        "media": {"key": "audio/" + episode_id + ".mp3", "sha256": ""},
        "duration_ms": 60000,
        "priority": 1,
        "initial_curated_at": at,
        "latest_curated_at": at,
    }
    if source:
        p["source"] = source
    return p


def envelope(episode_id, source):
    """The msgpack envelope: id, type, schema_version, producer, sent_at, payload."""
    # A UUIDv7 id: 48 bits of Unix milliseconds, then random bits.
    ms = int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)
    raw = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    env = {
        "id": str(uuid.UUID(bytes=bytes(raw))),
        "type": TYPE,
        "schema_version": 1,
        "producer": source,
        "sent_at": datetime.datetime.now(datetime.timezone.utc),
        "payload": payload(episode_id, source),
    }
    return env["id"], msgpack.packb(env, datetime=True)


class NATS:
    """The least of the NATS client protocol that publishing with an
    acknowledgement needs."""

    def __init__(self, hostport, user, password, inbox_prefix):
        use_tls = hostport.startswith("tls://")
        host, port = hostport.split("://", 1)[-1].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.buf = b""
        info = self.line()
        if not info.startswith(b"INFO "):
            raise RuntimeError("not a NATS server: %r" % info)
        if json.loads(info[5:]).get("tls_required") and not use_tls:
            raise RuntimeError("the server requires TLS: use tls://%s:%s" % (host, port))
        if use_tls:
            # NATS sends INFO in the clear, then the client upgrades.
            ctx = ssl.create_default_context(cafile=os.environ.get("NATS_CA"))
            if os.environ.get("NATS_CERT"):
                ctx.load_cert_chain(os.environ["NATS_CERT"], os.environ.get("NATS_KEY"))
            self.sock = ctx.wrap_socket(self.sock, server_hostname=host)
        connect = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True,
                   "protocol": 1, "user": user, "pass": password, "name": "python-publisher",
                   "lang": "python3", "version": "0"}
        self.send(b"CONNECT " + json.dumps(connect).encode() + b"\r\n")
        self.inbox = inbox_prefix + "." + uuid.uuid4().hex
        self.send(b"SUB " + self.inbox.encode() + b" 1\r\nPING\r\n")
        self.expect_pong()

    def send(self, b):
        self.sock.sendall(b)

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def expect_pong(self):
        while True:
            line = self.line()
            if line == b"PONG":
                return
            if line.startswith(b"-ERR"):
                raise RuntimeError(line.decode())

    def request(self, subject, headers, body):
        """HPUB with a reply inbox; returns the reply's body."""
        hdr = "NATS/1.0\r\n" + "".join("%s: %s\r\n" % kv for kv in headers.items()) + "\r\n"
        hdr = hdr.encode()
        self.send(b"HPUB %s %s %d %d\r\n" % (subject.encode(), self.inbox.encode(), len(hdr), len(hdr) + len(body))
                  + hdr + body + b"\r\n")
        while True:
            line = self.line()
            if line == b"PING":
                self.send(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise RuntimeError(line.decode())
            elif line.startswith(b"MSG "):
                return self.read(int(line.split()[-1]))
            elif line.startswith(b"HMSG "):
                parts = line.split()
                data = self.read(int(parts[-1]))
                return data[int(parts[-2]):]


def over_nats(hostport, user, password, episode_id, source):
    nc = NATS(hostport, user, password, "_INBOX_" + user)
    event_id, body = envelope(episode_id, source)
    ack = json.loads(nc.request(subject(source), {"Nats-Msg-Id": event_id, "Archivist-Type": TYPE}, body))
    print(json.dumps({"via": "nats", "event": event_id, "ack": ack}))
    if "error" in ack:
        # JetStream refused it (a wrong subject, a full stream): not stored.
        sys.exit(1)


def over_http(base, token, episode_id):
    body = dict(payload(episode_id))
    for k in ("initial_curated_at", "latest_curated_at"):
        body[k] = body[k].isoformat().replace("+00:00", "Z")
    req = urllib.request.Request(base.rstrip("/") + "/v1/episodes", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, answer = resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        status, answer = e.code, json.loads(e.read() or b"{}")
    print(json.dumps({"via": "http", "status": status, "answer": answer}))


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "nats":
        over_nats(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "http":
        over_http(*sys.argv[2:])
    else:
        sys.exit(__doc__)
