"""benchmarks/load_memory.py: its sizes are checked before any model file is built."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("mb", ["0", "191", "x"])
def test_bad_sizes_stop_before_any_work(mb, capsys, monkeypatch, benchmark_script) -> None:
    script = benchmark_script("load_memory")
    monkeypatch.setattr(script, "write_model", lambda *a, **k: pytest.fail("built a model before the check"))
    monkeypatch.setattr("sys.argv", ["benchmarks/load_memory.py", "--mb", mb])
    with pytest.raises(SystemExit) as stop:
        script.main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "argument --mb: expected an integer in 1..190" in err and "Traceback" not in err
