"""The report's attention-paths section from flex_bench CSVs: planted numbers reach the table as their ratios,
a length SDPA could not run says why, and a bad --flex file is one line before anything is written."""
import pandas as pd
import pytest

from harness import report
from harness.bench.flex_bench import summary
from tests.report_runs import planted

H = 4


def flex_csv(path):
    """Rows as flex_bench writes them: SDPA holds an fp32 (H, T, T) bias (4 H T^2 bytes), flex an (H, T)
    table and its BlockMask (planted: 64 H T bytes); T 4096 SDPA did not run."""
    rows = []
    for enc, layer in (("alibi", 0), ("rnope_swa", 0)):
        for T in (1024, 2048, 4096):
            for path_, mem, secs in (("sdpa", 4 * H * T * T, T / 1e4), ("flex", 64 * H * T, T / 4e4)):
                reason = "predicted peak 99 GiB > 0.6 of the 1 GiB available" if (T, path_) == (4096, "sdpa") else None
                for metric, value, unit in (("peak_extra_bytes", mem, "bytes"), ("s_per_call", secs, "s")):
                    rows.append(dict(encoding=enc, layer=layer, path=path_, T=T, metric=metric,
                                     value=float("nan") if reason else float(value), unit=unit, repeats=3,
                                     nan_reason=reason))
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_section_holds_the_ratios_and_the_reason(tmp_path):
    csv = flex_csv(tmp_path / "cpu.csv")
    md = report.build([planted(tmp_path / "sweep")], tmp_path / "out", flex=[csv]).read_text()
    assert "## Attention paths: FlexAttention against SDPA" in md and "### Machine `cpu`" in md
    line = next(x for x in md.splitlines() if x.startswith("| alibi @ 2048 |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    # columns: sdpa MiB, flex MiB, flex/sdpa memory, sdpa s, flex s, flex/sdpa time
    assert float(cells[3]) == pytest.approx(64 * H * 2048 / (4 * H * 2048 ** 2), rel=1e-3)  # 16 / T
    assert float(cells[6]) == pytest.approx(0.25, rel=1e-3)
    assert "Peak memory flex/SDPA at the longest length both paths ran: `alibi` 0.00781 at T 2048" in md
    assert "- not measured: alibi sdpa at T 4096: predicted peak 99 GiB" in md
    assert (tmp_path / "out" / "attention_paths.png").stat().st_size > 0


def test_summary_ratios_are_flex_over_sdpa(tmp_path):
    s = summary(pd.read_csv(flex_csv(tmp_path / "x.csv"))).loc[("rnope_swa", 0, 1024)]
    assert s["mem_flex/sdpa"] == pytest.approx(16 / 1024)
    assert s["sdpa_MiB"] == pytest.approx(4 * H * 1024 ** 2 / 2 ** 20)


@pytest.mark.parametrize("bad, says", [("missing.csv", "no such file"), ("other.csv", "not flex_bench rows")])
def test_bad_flex_file_is_one_line_and_writes_nothing(tmp_path, capsys, bad, says):
    pd.DataFrame({"a": [1]}).to_csv(tmp_path / "other.csv", index=False)
    sweep = planted(tmp_path / "sweep")
    with pytest.raises(SystemExit) as e:
        report.main([str(sweep), "--out", str(tmp_path / "o"), "--wandb", "disabled", "--flex", str(tmp_path / bad)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("harness.report: error: --flex ")
    assert says in err and not (tmp_path / "o" / "report.md").exists()
