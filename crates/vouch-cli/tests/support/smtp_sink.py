"""A real SMTP server on loopback (aiosmtpd) that stores every message it accepts.

usage: smtp_sink.py PORT DIR   — prints READY when listening; each message becomes DIR/N.eml
"""
import os
import sys
import time

from aiosmtpd.controller import Controller


class Sink:
    def __init__(self, folder):
        self.folder = folder

    async def handle_DATA(self, server, session, envelope):
        name = os.path.join(self.folder, "%d.eml" % time.time_ns())
        with open(name + ".tmp", "wb") as f:
            f.write(envelope.original_content or envelope.content)
        os.rename(name + ".tmp", name)
        return "250 Message accepted for delivery"


def main():
    port, folder = int(sys.argv[1]), sys.argv[2]
    os.makedirs(folder, exist_ok=True)
    c = Controller(Sink(folder), hostname="127.0.0.1", port=port)
    c.start()
    print("READY", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        c.stop()


if __name__ == "__main__":
    main()
