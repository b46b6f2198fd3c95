"""Owns org.freedesktop.Notifications on the session bus given by DBUS_SESSION_BUS_ADDRESS
and appends every Notify call to a JSON-lines file.  usage: notify_sink.py OUT  (prints READY)
"""
import asyncio
import json
import sys

from dbus_next.aio import MessageBus
from dbus_next.service import ServiceInterface, method


class Notifications(ServiceInterface):
    def __init__(self, out):
        super().__init__("org.freedesktop.Notifications")
        self.out = out
        self.count = 0

    @method()
    def Notify(self, app_name: "s", replaces_id: "u", app_icon: "s", summary: "s", body: "s",
               actions: "as", hints: "a{sv}", expire_timeout: "i") -> "u":
        self.count += 1
        with open(self.out, "a") as f:
            f.write(json.dumps({"app": app_name, "summary": summary, "body": body}) + "\n")
        return self.count

    @method()
    def GetCapabilities(self) -> "as":
        return ["body"]

    @method()
    def GetServerInformation(self) -> "ssss":
        return ["notify-sink", "vouch-tests", "1.0", "1.2"]

    @method()
    def CloseNotification(self, id: "u"):
        return None


async def main():
    bus = await MessageBus().connect()
    bus.export("/org/freedesktop/Notifications", Notifications(sys.argv[1]))
    await bus.request_name("org.freedesktop.Notifications")
    print("READY", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
