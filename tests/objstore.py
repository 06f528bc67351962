"""A real S3-compatible server for the object-storage tests: moto's S3 application served on 127.0.0.1.

One server per test process (pytest-xdist workers each start their own), on a free port chosen by
the operating system. The tests talk to it over HTTP through s3fs and botocore exactly as they would
to S3; nothing is mocked inside the process.
"""
from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator

#: Credentials moto accepts (any non-empty pair); never real ones.
ACCESS_KEY = "topicflow-test-key"
SECRET_KEY = "topicflow-test-secret"
REGION = "eu-west-1"


#: moto's S3 application alone, served as ``python -m moto.server`` serves its dispatcher of every AWS
#: service. The dispatcher matches each request's host against hundreds of services' URL patterns (about a
#: quarter of the server's CPU in these tests); here every request is S3's. The request log is off.
S3_ONLY_SERVER = (
    "import logging, sys\n"
    "from werkzeug.serving import run_simple\n"
    "from moto.moto_server.werkzeug_app import MotoRequestHandler, create_backend_app\n"
    "logging.getLogger('werkzeug').setLevel(logging.ERROR)\n"
    "run_simple('127.0.0.1', int(sys.argv[1]), create_backend_app('s3'), threaded=True,\n"
    "           request_handler=MotoRequestHandler)\n"
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class S3Server:
    """A running moto server (its process) and how to reach it."""

    endpoint: str
    server: Any = field(repr=False)

    @property
    def storage_options(self) -> dict[str, Any]:
        """s3fs options for this server (what ``--storage-option`` or the config would carry)."""
        return {"endpoint_url": self.endpoint, "key": ACCESS_KEY, "secret": SECRET_KEY,
                "client_kwargs": {"region_name": REGION}}

    def filesystem(self) -> Any:
        """A fresh s3fs filesystem on this server (not cached, so tests do not share listings)."""
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options)

    def new_bucket(self) -> str:
        """Create a bucket with a unique name and return the name."""
        name = f"tf-{uuid.uuid4().hex[:16]}"
        self.filesystem().mkdir(name)
        return name


def start_server() -> Iterator[S3Server]:
    """Start moto's server in a process of its own on 127.0.0.1 and a free port; stop it when the generator closes.

    A process, not moto's ``ThreadedMotoServer``: in a thread, the server's request handling competed for
    the test process's GIL with the very client calls it answered (the object-storage tests ran 10-20%
    slower that way).
    """
    import subprocess
    import sys
    import time

    from topicflow.testing.faults import HANG_GUARD_SECONDS

    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", S3_ONLY_SERVER, str(port)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # (its output is one log line per request: not piped, which would fill and stall the server)
    try:
        guard = time.monotonic() + HANG_GUARD_SECONDS  # a hang guard only: the server listens within a second
        while True:  # ready once it accepts a connection
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > guard:
                    process.kill()
                    raise RuntimeError(f"moto's server did not start on port {port} (exit {process.wait()})") from None
                time.sleep(0.05)
        yield S3Server(endpoint=f"http://127.0.0.1:{port}", server=process)
    finally:
        process.terminate()
        process.wait()
