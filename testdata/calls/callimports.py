"""Imports under Sandbox.Call: the application's imports need their rules."""

import json


def dumps(x):
    return json.dumps(x)


def needs_socket():
    import socket
    return socket.gethostname()


def needs_os():
    import os
    return os.getpid()
