"""The strategy form's Check cluster: ``preflight`` run as a real engine job, its table and its
problem lines shown on the form (the window never imports TensorFlow)."""
from __future__ import annotations

import socket

import pytest

from gui_app.core.cluster_addresses import free_ports
from gui_app.identity import app_command


def _cluster_check(panel, hosts: str | None = None):
    form = panel.strategy
    form.name.setCurrentIndex(form.name.findData("multi_worker_mirrored"))
    cluster = form.cluster
    if hosts is not None:
        cluster.place.setCurrentIndex(cluster.place.findData("hosts"))
        cluster.hosts.setPlainText(hosts)
    else:
        cluster.workers.setValue(2)
    assert panel.config() is not None
    check = cluster.check
    check.configure(lambda *args: app_command(*args), panel.config)  # the real engine, not the panel's fake one
    return check


def test_a_port_taken_by_another_program_is_shown_on_the_form(qtbot, panel):
    taken = socket.socket()
    taken.bind(("0.0.0.0", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        check = _cluster_check(panel, f"127.0.0.1:{port}\n127.0.0.1:{free_ports(1)[0]}")
        check.button.click()
        assert not check.button.isEnabled() and check.table.toPlainText().startswith("Checking")
        qtbot.waitUntil(lambda: check.button.isEnabled(), timeout=120_000)
    finally:
        taken.close()
    assert check.problems.isVisibleTo(panel)
    assert (f"worker 0 (chief) at 127.0.0.1:{port}: port {port} on 127.0.0.1 is taken by another program"
            in check.problems.text())
    table = check.table.toPlainText()
    assert "taken by another program" in table and "all-reduce: not run" in table


def test_forms_that_are_not_valid_say_so_without_a_job(qtbot, panel):
    check = _cluster_check(panel)
    check.configure(lambda *args: app_command(*args), lambda: None)
    check.button.click()
    assert check.problems.text() == "The forms do not describe a valid configuration yet."
    assert check.button.isEnabled() and not check.is_checking()


@pytest.mark.slow
def test_a_good_local_cluster_shows_the_table_with_the_canary(qtbot, panel):
    check = _cluster_check(panel)
    check.button.click()
    qtbot.waitUntil(lambda: check.button.isEnabled(), timeout=280_000)
    assert not check.problems.isVisibleTo(panel), check.problems.text()
    table = check.table.toPlainText()
    assert "every worker got the same sum" in table and table.endswith("ok"), table
