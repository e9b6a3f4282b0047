"""A small web app the ingress tests run *inside* a sandbox (stdlib only: the sandbox sees the
host's /usr/bin/python3, not the test venv).

    python3 sandbox_app.py PORT NAME

GET /echo          the request line, headers and peer address as JSON, with NAME (who answered)
GET /sse           three server-sent events, 0.3 s apart (streamed, never buffered)
POST /upload       the number of body bytes received (chunked uploads included)
GET /ws            a WebSocket that echoes every text or binary message
anything else      http.server's directory listing of the cwd
"""
import base64
import hashlib
import http.server
import json
import struct
import sys
import time

PORT, NAME = int(sys.argv[1]), sys.argv[2]
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class App(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall between them

    def log_message(self, *args):
        pass

    def _send(self, status, body, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/echo") or self.path.startswith("/api"):
            body = {"name": NAME, "method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                    "peer": list(self.client_address)}
            return self._send(200, json.dumps(body).encode())
        if self.path == "/sse":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(3):
                chunk = f"data: tick {i} {time.time()}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                time.sleep(0.3)
            self.wfile.write(b"0\r\n\r\n")
            return None
        if self.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            return self._websocket()
        return super().do_GET()

    def do_POST(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            total = 0
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                total += len(self.rfile.read(size))
                self.rfile.readline()
        else:
            total = len(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self._send(200, json.dumps({"name": NAME, "received": total, "path": self.path}).encode())

    def _websocket(self):
        accept = base64.b64encode(hashlib.sha1((self.headers["Sec-WebSocket-Key"] + WS_GUID).encode()).digest())
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept.decode())
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
        if "echo.v1" in offered:
            self.send_header("Sec-WebSocket-Protocol", "echo.v1")
        self.end_headers()
        self.wfile.flush()
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = struct.unpack(">H", self.rfile.read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(length)))
            if opcode == 8:  # close: answer it and stop
                self.wfile.write(b"\x88\x02\x03\xe8")
                self.wfile.flush()
                return
            if opcode in (1, 2):
                if opcode == 1:
                    data = f"{NAME}: ".encode() + data
                size = len(data)
                header = bytes([0x80 | opcode]) + (bytes([size]) if size < 126 else
                                                   b"\x7e" + struct.pack(">H", size) if size < 65536 else
                                                   b"\x7f" + struct.pack(">Q", size))
                self.wfile.write(header + data)
                self.wfile.flush()


http.server.ThreadingHTTPServer.allow_reuse_address = True
http.server.ThreadingHTTPServer(("0.0.0.0", PORT), App).serve_forever()
