"""MOIRAI sheet rows that do not describe a graph are refused with one line naming the sheet, the row and the task."""
from __future__ import annotations

import pytest

from placement_dsl.errors import SpecError
from placement_dsl.io.moirai import build

HEADERS = ["task", "c_task", "dir_succ", "dir_succ_add", "p0", "p1", "pc00", "pc01", "pc10", "pc11", "mi", "m0", "m1"]


def row(task, comm, succ, times="0"):
    return [task, comm, succ, "", 1.0, 2.0, times, times, times, times, 1.0, 10.0, 10.0]


def test_a_sheet_reads_when_flows_and_successors_align():
    graph, cluster, _ = build(HEADERS, [row(1.0, "10", "2", "1"), row(2.0, "", "")], "ok", "ok.xls")
    assert graph.n == 3 and cluster.names == ("d0", "d1")


@pytest.mark.parametrize("comm, succ, found", [("10,11", "2", "2 communication tasks"),
                                                ("10", "2,3", "1 communication tasks")])
def test_a_transfer_list_that_does_not_match_the_successors_is_named(comm, succ, found):
    times = ",".join("1" for _ in comm.split(","))
    rows = [row(1.0, comm, succ, times), row(2.0, "", ""), row(3.0, "", "")]
    with pytest.raises(SpecError, match=rf"sheet.xls, row 2: task 1: {found} .* successors .*; they must align") as err:
        build(HEADERS, rows, "bad", "sheet.xls")
    assert "\n" not in str(err.value)
