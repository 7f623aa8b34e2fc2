"""The Python side of the partial-mode example: a function a Go service calls.

fetch() speaks HTTP/1.0 over a plain socket so that it needs one module only
(python-import=socket). The sandbox decides which hosts it may reach.
"""

import socket


def fetch(host, port, path="/"):
    """Return the body of http://host:port/path as str."""
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode()
    return {"status": status, "body": body.decode()}
