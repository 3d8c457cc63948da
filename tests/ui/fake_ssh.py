"""A stand-in for the system ``ssh`` on PATH, for the window's ssh processes without a host.

``ssh -G`` answers with a configuration (the shared connection's name is built from it); any
other call prints ``printed`` (what ``runs --json`` there would) after ``delay_s``, or fails as
ssh's own failure (exit 255) when ``printed`` is None. Each call leaves a line in ``calls.log``:
its process id, then ``start`` or ``end``, so a test can tell which ssh processes were ended
before they answered.
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

_SCRIPT = """#!{python}
import os, sys, time
from pathlib import Path

log = Path({log!r})
if "-G" in sys.argv:
    print("hostname " + sys.argv[-1])
    print("user me")
    sys.exit(0)
with log.open("a") as f:
    f.write(f"{{os.getpid()}} start\\n")
time.sleep({delay_s!r})
with log.open("a") as f:
    f.write(f"{{os.getpid()}} end\\n")
printed = {printed!r}
if printed is None:
    print("ssh: connect to host gpu1 port 22: Connection refused", file=sys.stderr)
    sys.exit(255)
print(printed)
"""


class FakeSsh:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.log = folder / "calls.log"

    def answer(self, printed: str | None, delay_s: float = 0.0) -> None:
        """What the next calls print (None: ssh fails), and after how long."""
        script = self.folder / "ssh"
        script.write_text(_SCRIPT.format(python=sys.executable, log=str(self.log), delay_s=delay_s,
                                         printed=printed), encoding="utf-8")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)

    def calls(self) -> dict[int, list[str]]:
        """``{pid: ["start"] or ["start", "end"]}`` of the calls that got past ``-G``."""
        seen: dict[int, list[str]] = {}
        if self.log.exists():
            for line in self.log.read_text(encoding="utf-8").splitlines():
                pid, what = line.split()
                seen.setdefault(int(pid), []).append(what)
        return seen


def install(tmp_path: Path, monkeypatch, printed: str | None = "[]", delay_s: float = 0.0) -> FakeSsh:
    """Put a fake ``ssh`` first on PATH (its shared connections' folder: the test's own)."""
    folder = tmp_path / "fake-ssh"
    folder.mkdir()
    fake = FakeSsh(folder)
    fake.answer(printed, delay_s)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return fake
