# ExaBGP API helper for tartan-lab: copies command lines from a FIFO to
# ExaBGP (our stdout) and ExaBGP's messages (our stdin) to an events file.
# It exits when ExaBGP goes away, so it never outlives its daemon.
import os
import sys
import threading

fifo, events = sys.argv[1], sys.argv[2]


def pump_events():
    with open(events, "a", buffering=1) as out:
        for line in sys.stdin:
            out.write(line)
    os._exit(0)


threading.Thread(target=pump_events, daemon=True).start()
# O_RDWR: the FIFO never reads EOF when a writer closes it.
fd = os.open(fifo, os.O_RDWR)
while True:
    data = os.read(fd, 65536)
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        os._exit(0)
