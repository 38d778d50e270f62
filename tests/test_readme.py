"""The README's Python tour runs as written."""
from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - the README's code, run as written
    result = namespace["result"]
    assert result.bound <= result.objective + 1e-9
    assert result.status.value in ("optimal", "time_limit_feasible")


def test_readme_commands_match_ci():
    ci = (README.parent / ".ci" / "run").read_text()
    commands = re.findall(r"```bash\n\s*(pip install .*?)\n\s*```", README.read_text())
    assert len(commands) == 2
    for command in commands:
        assert command in ci
