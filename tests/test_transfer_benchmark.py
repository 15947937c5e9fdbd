"""benchmarks/transfer.py: its settings are checked before any model file is
built or any process started."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("argv, words", [(["--repeats", "0"], "argument --repeats: expected an integer >= 1, got 0"),
                                         (["--chunk-kib", "0"], "argument --chunk-kib: expected an integer in 4..16384, got 0"),
                                         # an OFFER asks for chunks of 4 KiB or more: 1 to 3 were refused later
                                         (["--chunk-kib", "2"], "argument --chunk-kib: expected an integer in 4..16384, got 2"),
                                         (["--chunk-kib", "20000"],
                                          "argument --chunk-kib: expected an integer in 4..16384, got 20000"),
                                         (["--window", "-2"], "argument --window: expected an integer >= 1, got -2")])
def test_bad_settings_stop_before_any_work(argv, words, capsys, monkeypatch, benchmark_script) -> None:
    """--repeats 0 was an IndexError after the settings line; a zero chunk or window reached the transfer."""
    script = benchmark_script("transfer")
    monkeypatch.setattr(script, "_model", lambda *a, **k: pytest.fail("built a model before the check"))
    with pytest.raises(SystemExit) as stop:
        script.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and words in err and "Traceback" not in err
