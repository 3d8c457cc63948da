"""A notification daemon for the tests, in its own process (so Qt's D-Bus thread never runs in the
test process): owns ``org.freedesktop.Notifications`` on the bus at ``argv[1]``, prints ``ready``,
then one JSON line per ``Notify`` call: its signature and its arguments (a dictionary argument,
which PySide6 cannot unpack, as its D-Bus signature), and answers each with an id."""
from __future__ import annotations

import json
import sys

from PySide6.QtCore import QCoreApplication
from PySide6.QtDBus import QDBusArgument, QDBusConnection, QDBusMessage, QDBusVirtualObject

SERVICE, PATH = "org.freedesktop.Notifications", "/org/freedesktop/Notifications"
INTROSPECTION = f"""<interface name="{SERVICE}">
 <method name="Notify">
  <arg type="s" direction="in"/><arg type="u" direction="in"/><arg type="s" direction="in"/>
  <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="as" direction="in"/>
  <arg type="a{{sv}}" direction="in"/><arg type="i" direction="in"/><arg type="u" direction="out"/>
 </method>
</interface>
"""


class NotificationService(QDBusVirtualObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def introspect(self, path: str) -> str:
        return INTROSPECTION

    def handleMessage(self, message: QDBusMessage, connection: QDBusConnection) -> bool:  # noqa: N802 - Qt's name
        if message.member() != "Notify":
            return False
        self.count += 1
        args = [a.currentSignature() if isinstance(a, QDBusArgument) else a for a in message.arguments()]
        print(json.dumps({"signature": message.signature(), "args": args}), flush=True)
        connection.send(message.createReply([self.count]))
        return True


def main() -> None:
    app = QCoreApplication([])
    connection = QDBusConnection.connectToBus(sys.argv[1], "notification-service")
    service = NotificationService()
    if not (connection.registerVirtualObject(PATH, service) and connection.registerService(SERVICE)):
        sys.exit(f"cannot own {SERVICE}: {connection.lastError().message()}")
    print("ready", flush=True)
    app.exec()


if __name__ == "__main__":
    main()
