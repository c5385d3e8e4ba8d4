"""The command ``holdoff run`` runs for the pytest plugin: it prints the environment holdoff gave
it (the proxy, its CA, the control API) as one line of JSON, then waits until the plugin closes
its input, which ends the run.
"""

import json
import os
import signal
import sys

# Only the plugin ends it, by closing its input: not a Ctrl-C meant for pytest.
signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.stdout.write(json.dumps(dict(os.environ)) + "\n")
sys.stdout.flush()
sys.stdin.read()
