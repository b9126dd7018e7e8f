#!/usr/bin/env python3
"""A FAKE model source for hearth's pull tests (never for anything else): one HTTP server that
speaks the Hugging Face Hub's routes that huggingface_hub uses and Ollama's registry routes, over
a folder of test files, with switches that make it misbehave the ways real servers do.

  ROOT/hf/OWNER/REPO/REVISION/...        a repository at a revision (a branch or tag name);
                                         its commit is sha1("OWNER/REPO@REVISION")
  ROOT/ollama/NAMESPACE/NAME/TAG/        model.gguf, and optionally template, system, params,
                                         license: the layers of a manifest v2
  ROOT/files/...                         plain files at /files/... (the https:// source)

Routes (as the real services answer them):
  GET  /api/models/OWNER/REPO/revision/REV          {"id", "sha": commit, "siblings": [{"rfilename"}]}
  GET  /api/models/OWNER/REPO/tree/REV?recursive=true
       [{"type": "file", "path", "size", "oid": git blob sha1, "lfs": {"oid": sha256, "size"}}],
       paged (--page-size) with a Link: <...>; rel="next" header
  GET|HEAD /OWNER/REPO/resolve/REV/PATH             an LFS file (.gguf, .safetensors, >= 1 MiB):
       302 to the "CDN" (http://CDN_HOST:PORT/cdn/SHA256) with X-Repo-Commit, X-Linked-Etag,
       X-Linked-Size; a small file: 200 with X-Repo-Commit and ETag
  GET  /cdn/SHA256                                  the content, with Range; a request carrying
       Authorization is refused (400), as S3 refuses a presigned URL with a second credential
  GET  /v2/NAMESPACE/NAME/manifests/TAG             application/vnd.docker.distribution.manifest.v2+json
  GET  /v2/NAMESPACE/NAME/blobs/sha256:HEX          307 to /cdn/HEX
  GET  /files/PATH                                  the content, with Range
  GET  /_stats                                      {"bytes_sent", "requests", "auth_on_cdn", "auth_on_hub"}

With --token T the Hub's routes answer 401 unless "Authorization: Bearer T" is sent.
Faults (--fault, repeatable): wrong-digest (a byte of every served content flipped), truncate
(content beyond half of each file is never sent: the body stops, the connection closes),
truncate-once (the first content answer stops halfway), overlong (no Content-Length, and 4096
bytes more than the range asked), redirect-loop (resolve redirects in a circle), dotdot (the tree
lists ../evil.gguf), absolute (the tree lists /etc/evil.gguf), no-range (Range ignored: 200 and
the whole file). --fail-first N: the first N content answers are 503. --rate B: bytes/s per
answer. The port is printed as "listening PORT" on stdout (and written to --port-file).
"""
import argparse
import hashlib
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_MIN_BYTES = 1 << 20
LAYER_TYPES = {
    "model.gguf": "application/vnd.ollama.image.model",
    "template": "application/vnd.ollama.image.template",
    "system": "application/vnd.ollama.image.system",
    "params": "application/vnd.ollama.image.params",
    "license": "application/vnd.ollama.image.license",
}


class Source:
    def __init__(self, args):
        self.root = os.path.abspath(args.root)
        self.args = args
        self.lock = threading.Lock()
        self.stats = {"bytes_sent": 0, "requests": 0, "auth_on_cdn": 0, "auth_on_hub": 0}
        self.digests = {}  # path -> (mtime, size, sha256, git oid)
        self.content_answers = 0

    def file_digests(self, path):
        st = os.stat(path)
        key = (st.st_mtime_ns, st.st_size)
        with self.lock:
            cached = self.digests.get(path)
        if cached and cached[0] == key:
            return cached[1], cached[2]
        sha, git = hashlib.sha256(), hashlib.sha1()
        git.update(b"blob %d\0" % st.st_size)
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
                git.update(block)
        value = (sha.hexdigest(), git.hexdigest())
        with self.lock:
            self.digests[path] = (key, value[0], value[1])
        return value

    def every_file(self):
        for d, _, names in os.walk(self.root):
            for n in names:
                yield os.path.join(d, n)

    def by_sha256(self, hex_digest):
        for p in self.every_file():
            if self.file_digests(p)[0] == hex_digest:
                return p
        return None

    def repo_dir(self, owner, repo, rev):
        """The folder of a repository at a revision given as a name or a commit."""
        base = os.path.join(self.root, "hf", owner, repo)
        if not os.path.isdir(base):
            return None, None
        for name in sorted(os.listdir(base)):
            commit = hashlib.sha1(f"{owner}/{repo}@{name}".encode()).hexdigest()
            if rev in (name, commit):
                return os.path.join(base, name), commit
        return base, None

    def count(self, field, n=1):
        with self.lock:
            self.stats[field] += n


def is_lfs(path, size):
    return path.endswith((".gguf", ".safetensors")) or size >= LFS_MIN_BYTES


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-model-source"

    def log_message(self, fmt, *args):  # quiet: the tests print what matters
        pass

    @property
    def src(self):
        return self.server.source

    def faults(self):
        return self.src.args.fault or []

    def reply(self, status, body=b"", headers=None, ctype="application/json"):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def redirect(self, status, location, headers=None):
        h = dict(headers or {})
        h["Location"] = location
        self.reply(status, b"", h, "text/plain")

    def hub_auth_ok(self):
        auth = self.headers.get("Authorization")
        if auth:
            self.src.count("auth_on_hub")
        token = self.src.args.token
        if token and auth != f"Bearer {token}":
            self.reply(401, {"error": "Invalid credentials"}, {"X-Error-Code": "GatedRepo"})
            return False
        return True

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.src.count("requests")
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        query = urllib.parse.parse_qs(url.query)
        try:
            if parts[:1] == ["_stats"]:
                with self.src.lock:
                    return self.reply(200, dict(self.src.stats))
            if parts[:2] == ["api", "models"] and len(parts) >= 6:
                if not self.hub_auth_ok():
                    return None
                owner, repo, what = parts[2], parts[3], parts[4]
                rev = "/".join(parts[5:])
                if what == "revision":
                    return self.hub_revision(owner, repo, rev)
                if what == "tree":
                    return self.hub_tree(owner, repo, rev, query)
            if len(parts) >= 5 and parts[2] == "resolve":
                if not self.hub_auth_ok():
                    return None
                return self.hub_resolve(parts[0], parts[1], parts[3], "/".join(parts[4:]))
            if parts[:1] == ["loop"]:
                nxt = "/loop/b" if parts[1:2] == ["a"] else "/loop/a"
                return self.redirect(302, nxt)
            if parts[:1] == ["cdn"] and len(parts) == 2:
                if self.headers.get("Authorization"):
                    self.src.count("auth_on_cdn")
                    return self.reply(400, "Only one auth mechanism allowed", ctype="text/plain")
                path = self.src.by_sha256(parts[1])
                if not path:
                    return self.reply(404, "NoSuchKey", ctype="text/plain")
                return self.content(path)
            if parts[:1] == ["v2"] and len(parts) == 5:
                return self.ollama(parts[1], parts[2], parts[3], parts[4])
            if parts[:1] == ["files"] and len(parts) >= 2:
                path = os.path.join(self.src.root, "files", *parts[1:])
                if ".." in parts or not os.path.isfile(path):
                    return self.reply(404, "not found", ctype="text/plain")
                return self.content(path)
            return self.reply(404, {"error": "not found"})
        except (BrokenPipeError, ConnectionResetError):
            return None

    # The Hub.
    def hub_files(self, d):
        out = []
        for base, _, names in os.walk(d):
            for n in sorted(names):
                full = os.path.join(base, n)
                out.append((os.path.relpath(full, d), full))
        return sorted(out)

    def hub_revision(self, owner, repo, rev):
        d, commit = self.src.repo_dir(owner, repo, rev)
        if d is None:
            return self.reply(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
        if commit is None:
            return self.reply(404, {"error": f"Invalid rev id: {rev}"},
                              {"X-Error-Code": "RevisionNotFound"})
        siblings = [{"rfilename": p} for p, _ in self.hub_files(d)]
        return self.reply(200, {"_id": commit[:24], "id": f"{owner}/{repo}",
                                "modelId": f"{owner}/{repo}", "sha": commit,
                                "private": False, "siblings": siblings})

    def hub_tree(self, owner, repo, rev, query):
        d, commit = self.src.repo_dir(owner, repo, rev)
        if d is None or commit is None:
            return self.reply(404, {"error": "not found"}, {"X-Error-Code": "RevisionNotFound"})
        entries, dirs = [], set()
        for rel, full in self.hub_files(d):
            size = os.path.getsize(full)
            sha, git = self.src.file_digests(full)
            e = {"type": "file", "oid": git, "size": size, "path": rel}
            if is_lfs(rel, size):
                e["lfs"] = {"oid": sha, "size": size, "pointerSize": 134}
            entries.append(e)
            parent = os.path.dirname(rel)
            while parent and parent not in dirs:
                dirs.add(parent)
                entries.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": parent})
                parent = os.path.dirname(parent)
        for fault, path in (("dotdot", "../evil.gguf"), ("absolute", "/etc/evil.gguf")):
            if fault in self.faults():
                entries.append({"type": "file", "oid": "1" * 40, "size": 10, "path": path,
                                "lfs": {"oid": "2" * 64, "size": 10, "pointerSize": 134}})
        page = self.src.args.page_size
        start = int(query.get("cursor", ["0"])[0])
        headers = {}
        if start + page < len(entries):
            nxt = f"/api/models/{owner}/{repo}/tree/{rev}?recursive=true&cursor={start + page}"
            headers["Link"] = f'<http://{self.headers.get("Host")}{nxt}>; rel="next"'
        return self.reply(200, entries[start:start + page], headers)

    def hub_resolve(self, owner, repo, rev, path):
        d, commit = self.src.repo_dir(owner, repo, rev)
        full = os.path.join(d or "", path)
        if d is None or commit is None or ".." in path.split("/") or not os.path.isfile(full):
            return self.reply(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
        if "redirect-loop" in self.faults():
            return self.redirect(302, "/loop/a")
        size = os.path.getsize(full)
        sha, git = self.src.file_digests(full)
        if is_lfs(path, size):
            cdn = f"http://{self.src.args.cdn_host}:{self.server.server_address[1]}/cdn/{sha}"
            return self.redirect(302, cdn, {"X-Repo-Commit": commit, "X-Linked-Etag": f'"{sha}"',
                                            "X-Linked-Size": str(size), "ETag": f'"{git}"'})
        return self.content(full, {"X-Repo-Commit": commit, "ETag": f'"{git}"'})

    # Ollama's registry.
    def ollama(self, ns, name, what, ref):
        d = os.path.join(self.src.root, "ollama", ns, name)
        if what == "manifests":
            tag_dir = os.path.join(d, ref)
            if not os.path.isdir(tag_dir):
                return self.reply(404, {"errors": [{"code": "MANIFEST_UNKNOWN",
                                                    "message": "manifest unknown"}]})
            layers = []
            for n, mt in LAYER_TYPES.items():
                p = os.path.join(tag_dir, n)
                if os.path.isfile(p):
                    layers.append({"mediaType": mt, "digest": "sha256:" + self.src.file_digests(p)[0],
                                   "size": os.path.getsize(p)})
            config = json.dumps({"model_format": "gguf", "model_family": "llama"}).encode()
            body = {"schemaVersion": 2,
                    "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                    "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                               "digest": "sha256:" + hashlib.sha256(config).hexdigest(),
                               "size": len(config)},
                    "layers": layers}
            return self.reply(200, body, ctype="application/vnd.docker.distribution.manifest.v2+json")
        if what == "blobs" and ref.startswith("sha256:"):
            if not self.src.by_sha256(ref[7:]):
                return self.reply(404, {"errors": [{"code": "BLOB_UNKNOWN"}]})
            return self.redirect(307, f"/cdn/{ref[7:]}")
        return self.reply(404, {"errors": [{"code": "NAME_UNKNOWN"}]})

    # Content, with Range and the faults.
    def content(self, path, headers=None):
        faults = self.faults()
        with self.src.lock:
            self.src.content_answers += 1
            answer = self.src.content_answers
        if answer <= self.src.args.fail_first:
            return self.reply(503, "Slow Down", {"Retry-After": "0"}, "text/plain")
        size = os.path.getsize(path)
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng and "no-range" not in faults:
            try:
                unit, spec = rng.split("=", 1)
                a, b = spec.split("-", 1)
                start, end = int(a), (int(b) if b else size - 1)
                assert unit == "bytes" and 0 <= start <= end
            except (ValueError, AssertionError):
                return self.reply(416, "bad range", {"Content-Range": f"bytes */{size}"}, "text/plain")
            if start >= size:
                return self.reply(416, "bad range", {"Content-Range": f"bytes */{size}"}, "text/plain")
            end = min(end, size - 1)
            status = 206
        length = end - start + 1
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        overlong = "overlong" in faults
        if overlong:
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        if self.command == "HEAD":
            return None
        # The bytes this answer sends: [start, stop).
        stop = end + 1
        if "truncate" in faults:
            stop = min(stop, max(start, size // 2))
        if "truncate-once" in faults and answer == 1 + self.src.args.fail_first:
            stop = start + length // 2
        flip = size // 2 if "wrong-digest" in faults else -1
        rate = self.src.args.rate
        began = time.monotonic()
        sent = 0
        with open(path, "rb") as f:
            f.seek(start)
            at = start
            while at < stop:
                block = bytearray(f.read(min(65536, stop - at)))
                if not block:
                    break
                if at <= flip < at + len(block):
                    block[flip - at] ^= 0xFF
                self.wfile.write(block)
                at += len(block)
                sent += len(block)
                self.src.count("bytes_sent", len(block))
                if rate:
                    ahead = sent / rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
        if overlong:
            self.wfile.write(b"\0" * 4096)
            self.src.count("bytes_sent", 4096)
        if stop < end + 1:
            self.close_connection = True  # the body ends short: as a dropped connection
        self.wfile.flush()
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--token")
    ap.add_argument("--cdn-host", default="127.0.0.1",
                    help="the host name the Hub redirects LFS files to (a different name from "
                         "the endpoint's makes it another host, as the real CDN is)")
    ap.add_argument("--fault", action="append")
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--rate", type=int, default=0)
    ap.add_argument("--page-size", type=int, default=1000)
    args = ap.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.source = Source(args)
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.rename(tmp, args.port_file)
    print(f"listening {port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
