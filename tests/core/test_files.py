"""Files the package writes: through a fresh temporary file (never a planted one), whole or not at all, and
commands that lose no answer when their output cannot be written."""
from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from placement_dsl import files
from placement_dsl.cli import main
from placement_dsl.errors import SpecError
from placement_dsl.files import atomic_open, check_writable, write_atomic

MODELS = Path(__file__).resolve().parents[2] / "models"
SMALL = str(MODELS / "transformer-small.json")
VICTIM = "precious\n"


def planted(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """``name`` in ``tmp_path`` with ``name.tmp`` planted as a symlink to another file; returns (out, victim)."""
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM)
    out = tmp_path / name
    (tmp_path / f"{name}.tmp").symlink_to(victim)
    return out, victim


def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fsync of a written file fails as on a full disk."""
    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", fsync)


def leftovers(folder: Path, *keep: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


# ---------------------------------------------------------------------------- the helper
def test_a_planted_temporary_name_is_never_written_through(tmp_path):
    out, victim = planted(tmp_path, "a.json")
    write_atomic(out, "new\n")
    assert victim.read_text() == VICTIM
    assert not out.is_symlink() and out.read_text() == "new\n"


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM)
    out = tmp_path / "a.json"
    out.symlink_to(victim)
    write_atomic(out, "new\n")
    assert victim.read_text() == VICTIM and not out.is_symlink() and out.read_text() == "new\n"


def test_problem_save_replaces_a_symlink_rather_than_writing_through_it(tmp_path):
    from placement_dsl import testing
    from placement_dsl.problem import Problem

    problem, _ = testing.diamond()
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM)
    out = tmp_path / "problem.json"
    out.symlink_to(victim)
    problem.save(out)
    assert victim.read_text() == VICTIM and not out.is_symlink()
    assert Problem.load(out).graph.names == problem.graph.names


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    out = tmp_path / "a.json"
    out.write_text("old\n")
    full_disk(monkeypatch)
    with pytest.raises(SpecError, match=r"cannot write '.*a\.json': No space left on device$"):
        write_atomic(out, "new\n")
    assert out.read_text() == "old\n" and leftovers(tmp_path) == ["a.json"]


def test_an_error_inside_the_block_removes_the_temporary(tmp_path):
    with pytest.raises(KeyError), atomic_open(tmp_path / "a.csv") as fh:
        fh.write("half")
        raise KeyError("x")
    assert leftovers(tmp_path) == []


def test_new_files_get_the_umask_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "a.json", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640


def test_a_replaced_file_keeps_its_permissions(tmp_path):
    out = tmp_path / "a.json"
    out.write_text("old")
    out.chmod(0o600)
    write_atomic(out, "new")
    assert out.stat().st_mode & 0o777 == 0o600 and out.read_text() == "new"


def test_a_pipe_is_written_in_place(tmp_path):
    """A device or pipe target (``/dev/stdout``) is written as it is, never replaced by a file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    write_atomic(fifo, "through\n")
    reader.join(10)
    assert got == ["through\n"] and stat.S_ISFIFO(fifo.stat().st_mode) and leftovers(tmp_path) == ["pipe"]


@pytest.mark.parametrize(("where", "words"), [
    ("missing/out.json", "directory '.*missing' does not exist"),
    ("file.txt/out.json", "'.*file.txt' is not a directory"),
    ("folder", "it is a directory"),
])
def test_check_writable_names_the_path_and_why(tmp_path, where, words):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "folder").mkdir()
    with pytest.raises(SpecError, match=f"cannot write '.*{Path(where).name}': {words}"):
        check_writable(tmp_path / where)


# ---------------------------------------------------------------------------- commands
def test_convert_does_not_write_through_a_planted_temporary(tmp_path, capsys):
    out, victim = planted(tmp_path, "out.json")
    assert main(["convert", SMALL, str(out)]) == 0
    assert victim.read_text() == VICTIM
    assert not out.is_symlink() and json.loads(out.read_text())["graph"]


def test_solve_out_does_not_write_through_a_planted_temporary(tmp_path, capsys):
    out, victim = planted(tmp_path, "split.json")
    assert main(["solve", SMALL, "--method", "greedy", "--out", str(out)]) == 0
    assert victim.read_text() == VICTIM and not out.is_symlink() and json.loads(out.read_text())


def test_moirai_schedule_does_not_write_through_a_planted_temporary(tmp_path, capsys, shared_data):
    pytest.importorskip("xlrd")
    out, victim = planted(tmp_path, "schedule.json")
    sheet = shared_data / "moirai" / "example-1.xls"
    assert main(["solve", str(sheet), "--objective", "latency", "--method", "list", "--out", str(out)]) == 0
    assert victim.read_text() == VICTIM and "assignment" in json.loads(out.read_text())


@pytest.mark.parametrize("where", ["missing/split.json", "file.txt/split.json", "folder"])
def test_solve_checks_out_before_solving(tmp_path, capsys, monkeypatch, where):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "folder").mkdir()
    from placement_dsl import heuristics

    def no_solve(*args: object, **kwargs: object) -> None:
        raise AssertionError("solved before checking --out")

    monkeypatch.setattr(heuristics, "run", no_solve)
    assert main(["solve", SMALL, "--method", "greedy", "--out", str(tmp_path / where), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: cannot write ") and Path(where).name in err


@pytest.mark.parametrize("sheet", [False, True])
def test_solve_on_a_full_disk_prints_the_answer_and_exits_2(tmp_path, capsys, monkeypatch, shared_data, sheet):
    if sheet:
        pytest.importorskip("xlrd")
    workload = [str(shared_data / "moirai" / "example-1.xls"), "--objective", "latency", "--method", "list"] \
        if sheet else [SMALL, "--method", "greedy"]
    full_disk(monkeypatch)
    out = tmp_path / "split.json"
    assert main(["solve", *workload, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    answer = json.loads(captured.out)
    assert answer["placement"] and answer["objective"] > 0
    assert captured.err.count("\n") == 1 and f"cannot write {str(out)!r}: No space left on device" in captured.err
    assert leftovers(tmp_path) == []


def test_convert_on_a_full_disk_leaves_nothing(tmp_path, capsys, monkeypatch):
    full_disk(monkeypatch)
    assert main(["convert", SMALL, str(tmp_path / "out.json")]) == 2
    assert "No space left on device" in capsys.readouterr().err and leftovers(tmp_path) == []


def test_show_splits_on_a_full_disk_prints_the_points(tmp_path, capsys, monkeypatch):
    full_disk(monkeypatch)
    assert main(["show", SMALL, "--kind", "splits", "--out", str(tmp_path / "splits.json")]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["kind"] == "splits" and "No space left on device" in captured.err
    assert leftovers(tmp_path) == []


def test_show_and_import_check_out_first(tmp_path, capsys):
    assert main(["show", SMALL, "--kind", "graph", "--out", str(tmp_path / "missing" / "g.svg")]) == 2
    assert main(["import", str(tmp_path / "no-model.onnx"), "--out", str(tmp_path / "missing" / "w.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all("missing' does not exist" in line for line in err)


def test_show_gantt_on_a_full_disk_prints_the_simulation(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    full_disk(monkeypatch)
    assert main(["show", SMALL, "--kind", "gantt", "--out", str(tmp_path / "gantt.png")]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["makespan_ms"] > 0 and "No space left on device" in captured.err
    assert leftovers(tmp_path) == []


def test_show_refuses_a_picture_suffix_before_the_work(tmp_path, capsys, monkeypatch):
    from placement_dsl import heuristics

    monkeypatch.setattr(heuristics, "run", lambda *a, **k: pytest.fail("placed before checking --out"))
    assert main(["show", SMALL, "--kind", "gantt", "--out", str(tmp_path / "gantt.txt")]) == 2
    assert "must end in one of" in capsys.readouterr().err


def test_text_is_written_as_utf8_whatever_the_locale(tmp_path):
    out = tmp_path / "a.json"
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    code = "import sys; from placement_dsl.files import write_atomic; write_atomic(sys.argv[1], 'op \\u00e9')"
    subprocess.run([sys.executable, "-c", code, str(out)], env=env, check=True, capture_output=True)
    assert out.read_bytes() == "op é".encode()
