"""MOIRAI sheet rows that do not describe a graph are refused with one line naming the sheet, the row and the task."""
from __future__ import annotations

import pytest

from placement_dsl.errors import SpecError
from placement_dsl.io.moirai import build, sheet_rows

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


def test_columns_in_any_order_on_any_sheet_read_every_row():
    """Rows end at the first empty ``task`` cell, not the first empty cell of the first column (here ``m1``,
    empty below the first row), and the operators' sheet is the one whose headers name ``task``."""
    rows = [row(1.0, "10", "2", "1"), row(2.0, "11", "3", "1"), row(3.0, "", "")]
    for r in rows[1:]:
        r[-2:] = ["", ""]  # the device memories are on the first data row only
    table = [HEADERS[::-1]] + [r[::-1] for r in rows] + [[""] * len(HEADERS), ["notes", "after", "the", "rows"]]
    headers, read = sheet_rows([[["notes"], ["about the sheet"]], table], "sheet.xls")
    graph, cluster, _ = build(headers, read, "shuffled", "sheet.xls")
    assert len(read) == 3 and graph.n == 5 and cluster.names == ("d0", "d1")


def test_an_empty_transfer_time_from_a_device_to_itself_is_zero():
    empty_diagonal = [1.0, "10", "2", "", 1.0, 2.0, "", "1", "1", "", 1.0, 10.0, 10.0]
    graph, _, _ = build(HEADERS, [empty_diagonal, row(2.0, "", "")], "ok", "ok.xls")
    assert graph.ops[graph.index["10"]].attrs["transfer_time"] == [[0.0, 1.0], [1.0, 0.0]]


@pytest.mark.parametrize("times", ["0", "1"])
def test_a_sheet_of_one_device_or_without_transfer_times_runs_one_op_at_a_time(times):
    """No links are fitted there; a cluster without links defaults to Tarnawski's invocations, and the sheet's
    makespan (its schedule MILP) was refused."""
    one = ["task", "c_task", "dir_succ", "dir_succ_add", "p0", "pc00", "mi", "m0"]
    graph, cluster, _ = build(one, [[1.0, "10", "2", "", 1.0, times, 1.0, 10.0], [2.0, "", "", "", 1.0, "", 1.0, ""]],
                              "one", "one.xls")
    assert graph.n == 3 and not cluster.invocation.any()
    _, still, _ = build(HEADERS, [row(1.0, "10", "2", "0"), row(2.0, "", "")], "still", "still.xls")
    assert not still.links and not still.invocation.any()


def test_an_empty_time_cell_is_named_by_its_row_and_column():
    """An empty p1 cell read "'' is not a number": it now says which cell is empty and that a number is wanted."""
    empty = row(2.0, "", "")
    empty[5] = ""
    with pytest.raises(SpecError, match=r"^sheet.xls, sheet 'ops', row 3, p1: the cell is empty; give a number$"):
        build(HEADERS, [row(1.0, "10", "2", "1"), empty], "bad", "sheet.xls, sheet 'ops'")


@pytest.mark.parametrize("bad, said", [("x", r"'x' is not a number"), ("-1", r"'-1' must be a finite number >= 0"),
                                       ("nan", r"'nan' must be a finite number >= 0"), ("1e19", r"'1e19' is beyond 1e\+18")])
def test_a_flows_times_read_at_once_still_name_the_first_bad_cell(bad, said):
    # a row's flow cells are parsed in one go (800,000 cells of a 20,000-task sheet one by one were half of its
    # reading); a bad one is then read one by one so that the message names its row, column and value
    good = [1.0, "10,11", "2,3", "", 1.0, 2.0, "0,0", "1,2.5", "3,4", "0,0", 1.0, 10.0, 10.0]
    graph, _, _ = build(HEADERS, [good, row(2.0, "", ""), row(3.0, "", "")], "ok", "ok.xls")
    assert graph.ops[graph.index["11"]].attrs["transfer_time"] == [[0.0, 2.5], [4.0, 0.0]]
    broken = list(good)
    broken[8] = f"3,{bad}"
    with pytest.raises(SpecError, match=rf"^ok.xls, row 2, pc10: {said}"):
        build(HEADERS, [broken, row(2.0, "", ""), row(3.0, "", "")], "bad", "ok.xls")
