"""``tokenwire demo``: the full answer over real loopback sockets, then the report measured over them.

``runs`` measures (the server, the five connections, the report),
``client`` is the slow raw-socket reader, ``command`` the flags and progress.
"""

from .client import Client, read_stream
from .command import cli_main
from .runs import DEMO_RCVBUF, DEMO_SNDBUF, DemoRuns, DemoSettings, demo_report, run_demo

__all__ = ["DEMO_RCVBUF", "DEMO_SNDBUF", "Client", "DemoRuns", "DemoSettings", "cli_main", "demo_report",
           "read_stream", "run_demo"]
